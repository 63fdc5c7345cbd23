//===- mlir_passes.cpp - MLIR rewrites tilec's CPU pipeline needs ---------===//
//
// Three passes for the CPU pipeline (`compile.rs` names them in
// `CPU_PIPELINE`), mostly of upstream MLIR patterns that upstream
// registers only inside test passes or bundled with other rewrites, and
// that MLIR's C API does not expose.
//
// `tilec-math-approximation` rewrites `math.exp`, `math.log`, `math.tanh`
// and `math.erf` on f32 (scalars and vectors) into MLIR's polynomial
// approximations (`populateMathPolynomialApproximationPatterns`): `arith`,
// `math.fma`/`math.floor`/`math.absf` and `vector.broadcast` ops, which
// LLVM keeps as vector code and which need no library. (Upstream has them
// only as `test-math-polynomial-approximation`.) Without it,
// `convert-math-to-libm` turns each lane of a vector into a scalar
// `expf`/`tanhf`/`erff` call.
//
// `tilec-expand-bf16` rewrites `arith.extf` from and `arith.truncf` to
// bf16 into integer operations (rounding to nearest even, NaN to a quiet
// NaN). LLVM lowers an f32 → bf16 truncation on CPUs without AVX-512 BF16
// to a call of `__truncsfbf2` per element, which the C runtime of GCC 12
// (Debian 12) does not even have. `arith-expand{include-bf16}` has
// upstream's patterns (`populateExpandBFloat16Patterns`, used here for
// `extf`) but also rewrites every `maximumf`/`minimumf` into compares and
// selects; and upstream's truncation picks a constant NaN on the 16-bit
// halves, a select that LLVM turns into one on bf16 lanes and does lane by
// lane on AVX2, so `truncf` has its own pattern here, whose select of two
// computed 32-bit values stays a `vblendvps`.
//
// `tilec-bf16-masked-as-i16` makes masked loads and stores of bf16 vectors
// (a partial vector tile's `llvm.intr.masked.load`/`store`, so it runs
// after `convert-vector-to-llvm`) masked loads and stores of i16 vectors:
// LLVM does bf16 ones lane by lane on AVX2 and builds the vector back
// from f32 lanes with `__truncsfbf2`.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/STLExtras.h"

#include <mutex>

namespace {

/// Rewrites the ops of `getOperation()` that `selected` picks with
/// `patterns`, and only those and what their rewrites create: a greedy
/// rewrite of the whole module would also fold and simplify everything
/// else, which is `canonicalize`'s job, not these passes'.
mlir::LogicalResult
rewriteSelected(mlir::Operation *root,
                llvm::function_ref<bool(mlir::Operation *)> selected,
                mlir::RewritePatternSet &&patterns) {
  llvm::SmallVector<mlir::Operation *> ops;
  root->walk([&](mlir::Operation *op) {
    if (selected(op))
      ops.push_back(op);
  });
  if (ops.empty())
    return mlir::success();
  mlir::GreedyRewriteConfig config;
  config.setStrictness(mlir::GreedyRewriteStrictness::ExistingAndNewOps);
  config.enableFolding(false);
  return mlir::applyOpPatternsGreedily(
      ops, mlir::FrozenRewritePatternSet(std::move(patterns)), config);
}

/// The math ops tilec emits that MLIR approximates; `sqrt`, `rsqrt` and the
/// absolute values lower to LLVM intrinsics (`vsqrtps`, `vandps`, ...).
bool isApproximated(llvm::StringRef name) {
  return llvm::is_contained({mlir::math::ExpOp::getOperationName(),
                             mlir::math::LogOp::getOperationName(),
                             mlir::math::TanhOp::getOperationName(),
                             mlir::math::ErfOp::getOperationName()},
                            name);
}

struct MathApproximationPass
    : public mlir::PassWrapper<MathApproximationPass, mlir::OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MathApproximationPass)

  llvm::StringRef getName() const final { return "TilecMathApproximation"; }
  llvm::StringRef getArgument() const final {
    return "tilec-math-approximation";
  }
  llvm::StringRef getDescription() const final {
    return "Rewrite f32 math.exp/log/tanh/erf into MLIR's polynomial "
           "approximations (vector code, no library calls)";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const final {
    registry.insert<mlir::arith::ArithDialect, mlir::math::MathDialect,
                    mlir::vector::VectorDialect>();
  }

  void runOnOperation() final {
    mlir::RewritePatternSet patterns(&getContext());
    mlir::populateMathPolynomialApproximationPatterns(patterns,
                                                      isApproximated);
    auto selected = [](mlir::Operation *op) {
      return isApproximated(op->getName().getStringRef());
    };
    if (mlir::failed(
            rewriteSelected(getOperation(), selected, std::move(patterns))))
      return signalPassFailure();
    // An op the patterns do not take (an element type other than f32) would
    // reach LLVM as a library call per lane; tilec computes every math
    // function in f32, so that is a tilec bug, reported here rather than
    // as a slow kernel.
    getOperation()->walk([&](mlir::Operation *op) {
      if (selected(op)) {
        op->emitOpError("has no polynomial approximation for its type "
                        "(tilec computes math functions in f32)");
        signalPassFailure();
      }
    });
  }
};

/// `arith.extf` from bf16 or `arith.truncf` to bf16.
bool convertsBf16(mlir::Operation *op) {
  auto isBf16 = [](mlir::Type t) {
    return mlir::getElementTypeOrSelf(t).isBF16();
  };
  if (auto ext = llvm::dyn_cast<mlir::arith::ExtFOp>(op))
    return isBf16(ext.getIn().getType());
  if (auto trunc = llvm::dyn_cast<mlir::arith::TruncFOp>(op))
    return isBf16(trunc.getType());
  return false;
}

/// f32 → bf16 as integer operations: the upper half of the f32 bits,
/// rounded to nearest even (add 0x7FFF plus the lowest kept bit; a carry
/// into the exponent rounds up to the next binade or to infinity, as it
/// should). A NaN keeps its sign and upper payload with the quiet bit set
/// (rounding could carry its payload into the sign), as `vcvtneps2bf16`
/// does.
struct TruncF32ToBf16 : public mlir::OpRewritePattern<mlir::arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;

  mlir::LogicalResult
  matchAndRewrite(mlir::arith::TruncFOp op,
                  mlir::PatternRewriter &rewriter) const final {
    mlir::Value in = op.getIn();
    if (!mlir::getElementTypeOrSelf(in.getType()).isF32() ||
        !mlir::getElementTypeOrSelf(op.getType()).isBF16())
      return rewriter.notifyMatchFailure(op, "not an f32 -> bf16 truncation");
    mlir::ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto like = [&](mlir::Type elem) -> mlir::Type {
      if (auto vector = llvm::dyn_cast<mlir::VectorType>(in.getType()))
        return vector.clone(elem);
      return elem;
    };
    mlir::Type i32 = like(b.getI32Type());
    auto constant = [&](int64_t value) {
      return mlir::createScalarOrSplatConstant(b, b.getLoc(), i32,
                                                      value);
    };
    mlir::Value bits = mlir::arith::BitcastOp::create(b, i32, in);
    mlir::Value sixteen = constant(16);
    mlir::Value lowestKept = mlir::arith::AndIOp::create(
        b, mlir::arith::ShRUIOp::create(b, bits, sixteen), constant(1));
    mlir::Value rounded = mlir::arith::AddIOp::create(
        b, bits, mlir::arith::AddIOp::create(b, lowestKept, constant(0x7FFF)));
    mlir::Value isNan = mlir::arith::CmpFOp::create(
        b, mlir::arith::CmpFPredicate::UNO, in, in);
    mlir::Value quietNan =
        mlir::arith::OrIOp::create(b, bits, constant(0x00400000));
    mlir::Value chosen =
        mlir::arith::SelectOp::create(b, isNan, quietNan, rounded);
    mlir::Value upper = mlir::arith::TruncIOp::create(
        b, like(b.getI16Type()),
        mlir::arith::ShRUIOp::create(b, chosen, sixteen));
    rewriter.replaceOpWithNewOp<mlir::arith::BitcastOp>(op, op.getType(),
                                                        upper);
    return mlir::success();
  }
};

/// A vector of bf16 as the same vector of i16.
mlir::VectorType asI16(mlir::VectorType bf16) {
  return bf16.clone(mlir::IntegerType::get(bf16.getContext(), 16));
}

bool isBf16Vector(mlir::Type t) {
  auto vector = llvm::dyn_cast<mlir::VectorType>(t);
  return vector && vector.getElementType().isBF16();
}

/// `llvm.intr.masked.load` of bf16 lanes → the same load of i16 lanes.
struct MaskedLoadBf16AsI16
    : public mlir::OpRewritePattern<mlir::LLVM::MaskedLoadOp> {
  using OpRewritePattern::OpRewritePattern;

  mlir::LogicalResult
  matchAndRewrite(mlir::LLVM::MaskedLoadOp op,
                  mlir::PatternRewriter &rewriter) const final {
    if (!isBf16Vector(op.getType()))
      return rewriter.notifyMatchFailure(op, "not a bf16 vector");
    mlir::ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    mlir::VectorType lanes = asI16(llvm::cast<mlir::VectorType>(op.getType()));
    mlir::Value passThru = op.getPassThru();
    if (passThru)
      passThru = mlir::LLVM::BitcastOp::create(b, lanes, passThru);
    mlir::Value load = mlir::LLVM::MaskedLoadOp::create(
        b, lanes, op.getData(), op.getMask(), passThru, op.getAlignmentAttr(),
        op.getNontemporalAttr());
    rewriter.replaceOpWithNewOp<mlir::LLVM::BitcastOp>(op, op.getType(), load);
    return mlir::success();
  }
};

/// `llvm.intr.masked.store` of bf16 lanes → the same store of i16 lanes.
struct MaskedStoreBf16AsI16
    : public mlir::OpRewritePattern<mlir::LLVM::MaskedStoreOp> {
  using OpRewritePattern::OpRewritePattern;

  mlir::LogicalResult
  matchAndRewrite(mlir::LLVM::MaskedStoreOp op,
                  mlir::PatternRewriter &rewriter) const final {
    if (!isBf16Vector(op.getValue().getType()))
      return rewriter.notifyMatchFailure(op, "not a bf16 vector");
    mlir::ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    mlir::Value lanes = mlir::LLVM::BitcastOp::create(
        b, asI16(op.getValue().getType()), op.getValue());
    rewriter.replaceOpWithNewOp<mlir::LLVM::MaskedStoreOp>(
        op, lanes, op.getData(), op.getMask(), op.getAlignmentAttr());
    return mlir::success();
  }
};

/// A masked load or store of bf16 lanes.
bool isBf16MaskedMemoryOp(mlir::Operation *op) {
  if (auto load = llvm::dyn_cast<mlir::LLVM::MaskedLoadOp>(op))
    return isBf16Vector(load.getType());
  if (auto store = llvm::dyn_cast<mlir::LLVM::MaskedStoreOp>(op))
    return isBf16Vector(store.getValue().getType());
  return false;
}

struct Bf16MaskedAsI16Pass
    : public mlir::PassWrapper<Bf16MaskedAsI16Pass, mlir::OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(Bf16MaskedAsI16Pass)

  llvm::StringRef getName() const final { return "TilecBf16MaskedAsI16"; }
  llvm::StringRef getArgument() const final {
    return "tilec-bf16-masked-as-i16";
  }
  llvm::StringRef getDescription() const final {
    return "Make masked loads and stores of bf16 vectors (LLVM dialect) "
           "masked loads and stores of i16 vectors";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const final {
    registry.insert<mlir::LLVM::LLVMDialect>();
  }

  void runOnOperation() final {
    mlir::RewritePatternSet patterns(&getContext());
    patterns.add<MaskedLoadBf16AsI16, MaskedStoreBf16AsI16>(&getContext());
    if (mlir::failed(rewriteSelected(getOperation(), isBf16MaskedMemoryOp,
                                     std::move(patterns))))
      return signalPassFailure();
  }
};

struct ExpandBf16Pass
    : public mlir::PassWrapper<ExpandBf16Pass, mlir::OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ExpandBf16Pass)

  llvm::StringRef getName() const final { return "TilecExpandBf16"; }
  llvm::StringRef getArgument() const final { return "tilec-expand-bf16"; }
  llvm::StringRef getDescription() const final {
    return "Rewrite bf16 <-> f32 conversions into integer operations "
           "(round to nearest even), without library calls";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const final {
    registry.insert<mlir::arith::ArithDialect>();
  }

  void runOnOperation() final {
    mlir::RewritePatternSet patterns(&getContext());
    // Ours wins over upstream's truncation (see the file's header).
    patterns.add<TruncF32ToBf16>(&getContext(), /*benefit=*/2);
    mlir::arith::populateExpandBFloat16Patterns(patterns);
    if (mlir::failed(rewriteSelected(getOperation(), convertsBf16,
                                     std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

/// Registers `tilec-math-approximation`, `tilec-expand-bf16` and
/// `tilec-bf16-masked-as-i16` with MLIR's pass registry, once per process,
/// so textual pipelines can name them.
extern "C" void tilecRegisterMlirPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::PassRegistration<MathApproximationPass>();
    mlir::PassRegistration<ExpandBf16Pass>();
    mlir::PassRegistration<Bf16MaskedAsI16Pass>();
  });
}
