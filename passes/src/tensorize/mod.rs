//! Tensor-intrinsic mapping (issue 22): how a compute op's loops can be
//! computed by a target's intrinsics ([`mapping`]). The `tensorize` pass
//! that rewrites the innermost tile into intrinsic calls will live here
//! too; docs/tensorize.md says what exists.

pub mod mapping;
