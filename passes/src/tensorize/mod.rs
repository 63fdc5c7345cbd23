//! Tensor-intrinsic mapping (issue 22): the `tensorize` pass. The mapping
//! candidates it reads live in the core (`tilec::target::mapping`), where
//! the verifier checks a schedule's `intrinsic` knob against them.
