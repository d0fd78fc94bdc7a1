// sharemap's burst-sampling pass (clang -fpass-plugin=libsharemap_burst.so).
//
// Arnold and Ryder's scheme: after the optimiser, each function with memory accesses gets a
// second, instrumented copy of its body. One thread-local word decides which copy runs:
// positive, plain code counting down to the next burst; negative, a burst counting up to
// its end. Function entries dispatch on its sign; loop back-edges count, and when the count
// runs out call the runtime, which starts or ends a burst, and jump to the header of the
// copy that is now due. The plain copy is the optimised code itself, checks added.
//
// Counting: an innermost loop without calls keeps the count in a register (loaded before
// the loop, stored back at its exits), so a vectorised loop pays an add and a branch per
// iteration; any other loop counts in the thread-local word at each back-edge.
//
// After the copies are wired together, a value defined in one copy may reach a block of
// the other through a back-edge jump: every such use is rewritten through SSAUpdater,
// with the value and its copy as the two definitions.
//
// Settings come from the environment of the compiler (sharemap cc sets them):
// SHAREMAP_BURST=ON:OFF, back-edges per burst and between bursts (ON = 0: never).

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/CaptureTracking.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"
#include "llvm/Transforms/Utils/LoopUtils.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"
#include "llvm/Transforms/Utils/SSAUpdater.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

#include <cstdlib>
#include <deque>
#include <string>

using namespace llvm;

namespace {

struct Setting {
  int64_t on = 0, off = 0;
};

// SHAREMAP_BURST=ON:OFF; anything else is refused by sharemap cc before the compiler runs.
Setting setting() {
  Setting s;
  const char *e = std::getenv("SHAREMAP_BURST");
  if (!e) return s;
  char *end = nullptr;
  s.on = std::strtoll(e, &end, 10);
  if (end && *end == ':') s.off = std::strtoll(end + 1, nullptr, 10);
  if (s.on < 0 || s.off < 0) s = Setting();
  return s;
}

// What a function needs from the module.
struct Runtime {
  GlobalVariable *state;
  FunctionCallee switchFn;
  FunctionCallee read[5], write[5], readRange, writeRange, memcpy, memmove, memset;
  Type *i64, *i8p;
  Setting set;
};

// One memory access of the original body: its instruction, which operands give the
// address and the length (-1: the fixed `bytes`), read and/or write.
struct Access {
  Instruction *inst;
  int addrOp, sizeOp;
  uint64_t bytes;
  bool read, write;
};

bool isOurs(const Function &F) {
  StringRef n = F.getName();
  return n.startswith("__sharemap") || n.startswith("__tsan") || n.startswith("__sanitizer");
}

// Accesses no other thread can make: a local whose address never escapes, a constant.
bool unshared(Value *addr) {
  if (addr->getType()->getPointerAddressSpace() != 0) return true;
  const Value *base = getUnderlyingObject(addr);
  if (auto *gv = dyn_cast<GlobalVariable>(base)) return gv->isConstant();
  if (isa<AllocaInst>(base)) return !PointerMayBeCaptured(base, true, true);
  return false;
}

void collect(Function &F, const DataLayout &DL, SmallVectorImpl<Access> &out) {
  auto size = [&](Type *t) { return (uint64_t)DL.getTypeStoreSize(t); };
  for (Instruction &I : instructions(F)) {
    if (auto *L = dyn_cast<LoadInst>(&I)) {
      if (!unshared(L->getPointerOperand())) out.push_back({&I, 0, -1, size(L->getType()), true, false});
    } else if (auto *S = dyn_cast<StoreInst>(&I)) {
      if (!unshared(S->getPointerOperand()))
        out.push_back({&I, 1, -1, size(S->getValueOperand()->getType()), false, true});
    } else if (auto *R = dyn_cast<AtomicRMWInst>(&I)) {
      out.push_back({&I, 0, -1, size(R->getValOperand()->getType()), true, true});
    } else if (auto *C = dyn_cast<AtomicCmpXchgInst>(&I)) {
      out.push_back({&I, 0, -1, size(C->getCompareOperand()->getType()), true, true});
    } else if (isa<MemIntrinsic>(&I)) {
      // Made a call to libc in the instrumented copy (as ThreadSanitizer's pass does): the
      // runtime's wrapper records its ranges while the thread is in a burst.
      out.push_back({&I, -1, -1, 0, false, false});
    } else if (auto *II = dyn_cast<IntrinsicInst>(&I)) {
      // Masked vector loads and stores: the whole vector's bytes. (Gathers and scatters,
      // which need AVX2 or later, are not recorded.)
      Intrinsic::ID id = II->getIntrinsicID();
      if (id == Intrinsic::masked_load) out.push_back({&I, 0, -1, size(II->getType()), true, false});
      else if (id == Intrinsic::masked_store)
        out.push_back({&I, 1, -1, size(II->getArgOperand(0)->getType()), false, true});
    }
  }
}

int sizeIndex(uint64_t bytes) {
  switch (bytes) {
  case 1: return 0;
  case 2: return 1;
  case 4: return 2;
  case 8: return 3;
  case 16: return 4;
  default: return -1;
  }
}

// The callbacks before one access of the instrumented copy (its operands as they are
// after the copies were joined).
void instrument(const Access &a, Instruction *I, Runtime &rt) {
  IRBuilder<> b(I);
  if (auto *M = dyn_cast<MemIntrinsic>(I)) {
    Value *dst = b.CreatePointerCast(M->getRawDest(), rt.i8p);
    Value *len = b.CreateZExtOrTrunc(M->getLength(), rt.i64);
    if (auto *T = dyn_cast<MemTransferInst>(M)) {
      Value *src = b.CreatePointerCast(T->getRawSource(), rt.i8p);
      b.CreateCall(isa<MemMoveInst>(T) ? rt.memmove : rt.memcpy, {dst, src, len});
    } else {
      Value *byte = b.CreateZExt(cast<MemSetInst>(M)->getValue(), Type::getInt32Ty(I->getContext()));
      b.CreateCall(rt.memset, {dst, byte, len});
    }
    I->eraseFromParent();
    return;
  }
  Value *p = b.CreatePointerCast(I->getOperand(a.addrOp), rt.i8p);
  int k = a.sizeOp >= 0 ? -1 : sizeIndex(a.bytes);
  Value *len = a.sizeOp >= 0 ? b.CreateZExtOrTrunc(I->getOperand(a.sizeOp), rt.i64)
                             : static_cast<Value *>(ConstantInt::get(rt.i64, a.bytes));
  if (a.read) {
    if (k >= 0) b.CreateCall(rt.read[k], {p});
    else b.CreateCall(rt.readRange, {p, len});
  }
  if (a.write) {
    if (k >= 0) b.CreateCall(rt.write[k], {p});
    else b.CreateCall(rt.writeRange, {p, len});
  }
}

bool isRealCall(const Instruction &I) {
  auto *C = dyn_cast<CallBase>(&I);
  if (!C) return false;
  if (auto *II = dyn_cast<IntrinsicInst>(C)) {
    // Intrinsics that become calls into libc are not instrumented (no sharemap state).
    (void)II;
    return false;
  }
  return !C->isInlineAsm() || C->mayHaveSideEffects();
}

// Whether the CFG can be copied and its copies joined at back-edges.
bool joinable(Function &F) {
  for (BasicBlock &BB : F) {
    if (BB.hasAddressTaken()) return false;
    Instruction *T = BB.getTerminator();
    if (isa<IndirectBrInst>(T) || isa<CallBrInst>(T)) return false;
    for (Instruction &I : BB) {
      if (I.getType()->isTokenTy()) return false;
      if (I.isEHPad() && !isa<LandingPadInst>(&I)) return false;
    }
  }
  return true;
}

// A back-edge check: the block on the edge latch -> header, and the block that calls the
// runtime when the count runs out.
struct Check {
  BasicBlock *header, *check, *sw;
  Instruction *step;   // the add of -1 (plain) or +1 (burst)
  ICmpInst *expired;   // <= 0 (plain) or >= 0 (burst)
  CallInst *call;      // the runtime's switch; its second argument says which copy calls
  Instruction *reloaded; // a register count's value after the switch (null: in the word)
};

class Burst {
public:
  Burst(Function &F, Runtime &rt) : F(F), rt(rt), DL(F.getParent()->getDataLayout()) {}

  bool run() {
    SmallVector<Access, 32> accesses;
    collect(F, DL, accesses);
    if (accesses.empty()) return false;
    bool join = joinable(F);
    BasicBlock *body = splitEntry();
    if (join) addChecks();
    // Copy every block but the new entry (with the static allocas, shared by both copies).
    ValueToValueMapTy vmap;
    SmallVector<BasicBlock *, 32> originals, copies;
    for (BasicBlock &BB : F)
      if (&BB != entry) originals.push_back(&BB);
    for (BasicBlock *BB : originals) {
      BasicBlock *C = CloneBasicBlock(BB, vmap, ".burst", &F);
      vmap[BB] = C;
      copies.push_back(C);
    }
    remapInstructionsInBlocks(copies, vmap);
    // The entry dispatches on the sign of the state; 0, a thread's first check, asks the
    // runtime (which draws the thread's phase).
    auto *burstBody = cast<BasicBlock>(vmap[body]);
    LLVMContext &ctx = F.getContext();
    BasicBlock *notPlain = BasicBlock::Create(ctx, "burst.entry.other", &F, body);
    BasicBlock *ask = BasicBlock::Create(ctx, "burst.entry.first", &F, body);
    IRBuilder<> b(entry->getTerminator());
    Value *s = b.CreateLoad(rt.i64, rt.state, "burst.state");
    b.CreateCondBr(b.CreateICmpSLE(s, ConstantInt::get(rt.i64, 0)), notPlain, body);
    entry->getTerminator()->eraseFromParent();
    IRBuilder<> o(notPlain);
    o.CreateCondBr(o.CreateICmpEQ(s, ConstantInt::get(rt.i64, 0)), ask, burstBody);
    IRBuilder<> a(ask);
    a.CreateCondBr(a.CreateCall(rt.switchFn, {rt.state, ConstantInt::getFalse(ctx), ConstantInt::get(rt.i64, rt.set.on),
                                              ConstantInt::get(rt.i64, rt.set.off)}),
                   burstBody, body);
    if (join) {
      joinCopies(vmap);
      repair(originals, vmap);
    }
    for (const Access &a : accesses) instrument(a, cast<Instruction>(vmap[a.inst]), rt);
    return true;
  }

private:
  Function &F;
  Runtime &rt;
  const DataLayout &DL;
  BasicBlock *entry = nullptr;
  std::deque<Check> checks; // stable addresses: addCheck returns a reference

  // A new entry block holding the static allocas; the old entry's rest becomes the body.
  BasicBlock *splitEntry() {
    BasicBlock *old = &F.getEntryBlock();
    entry = BasicBlock::Create(F.getContext(), "burst.entry", &F, old);
    SmallVector<AllocaInst *, 8> allocas;
    for (Instruction &I : *old)
      if (auto *A = dyn_cast<AllocaInst>(&I))
        if (A->isStaticAlloca()) allocas.push_back(A);
    BranchInst *br = BranchInst::Create(old, entry);
    for (AllocaInst *A : allocas) A->moveBefore(br);
    return old;
  }

  // Counts at each loop's back-edges (in the original, before it is copied). A nest of
  // loops without calls keeps one count in a register for all its back-edges (loaded before
  // the nest, stored at its exits): the optimiser's blocked loops run inner loops of a few
  // iterations, and a round trip through the thread-local word at each made a matrix
  // product 1.5 times slower. Other loops count in the word itself.
  void addChecks() {
    auto callFree = [](Loop *L) {
      for (BasicBlock *BB : L->blocks())
        for (Instruction &I : *BB)
          if (isRealCall(I)) return false;
      return true;
    };
    auto isRoot = [&](Loop *L) { return callFree(L) && (!L->getParentLoop() || !callFree(L->getParentLoop())); };
    {
      // The optimiser leaves loops without a preheader or with shared exits: a nest's
      // outermost loop gets both, to load its count before and store it after.
      DominatorTree DT(F);
      LoopInfo LI(DT);
      for (Loop *L : LI.getLoopsInPreorder()) {
        if (!isRoot(L)) continue;
        if (!L->getLoopPreheader()) InsertPreheaderForLoop(L, &DT, &LI, nullptr, false);
        if (!L->hasDedicatedExits()) formDedicatedExitBlocks(L, &DT, &LI, nullptr, false);
      }
    }
    // Every loop looked at on the CFG as it is now, before any check is added.
    struct Edge {
      BasicBlock *header, *latch;
    };
    struct Nest {
      BasicBlock *preheader;
      SmallVector<BasicBlock *, 4> exits;
      SmallVector<Edge, 8> edges;
    };
    SmallVector<Nest, 4> nests;
    SmallVector<Edge, 8> inMemory;
    {
      DominatorTree DT(F);
      LoopInfo LI(DT);
      for (Loop *L : LI.getLoopsInPreorder()) {
        SmallVector<BasicBlock *, 4> latches;
        if (!callFree(L)) {
          L->getLoopLatches(latches);
          for (BasicBlock *latch : latches) inMemory.push_back({L->getHeader(), latch});
          continue;
        }
        if (!isRoot(L)) continue;
        if (!L->getLoopPreheader() || !L->hasDedicatedExits()) {
          // Left as the optimiser made it (a header reached by indirect branches): every
          // loop of the nest counts in the word.
          for (Loop *M : L->getLoopsInPreorder()) {
            latches.clear();
            M->getLoopLatches(latches);
            for (BasicBlock *latch : latches) inMemory.push_back({M->getHeader(), latch});
          }
          continue;
        }
        Nest n{L->getLoopPreheader(), {}, {}};
        L->getUniqueExitBlocks(n.exits);
        for (Loop *M : L->getLoopsInPreorder()) {
          latches.clear();
          M->getLoopLatches(latches);
          for (BasicBlock *latch : latches) n.edges.push_back({M->getHeader(), latch});
        }
        nests.push_back(std::move(n));
      }
    }
    for (Edge &e : inMemory) addCheck(e.header, e.latch, nullptr);
    for (Nest &n : nests) {
      // The count is one variable of the nest: its value at each point is found by
      // SSAUpdater from where it is set (before the nest, at each check and switch).
      IRBuilder<> pre(n.preheader->getTerminator());
      Value *c0 = pre.CreateLoad(rt.i64, rt.state, "burst.count0");
      SmallVector<std::pair<Instruction *, BasicBlock *>, 8> placeholders;
      SSAUpdater ssa;
      ssa.Initialize(rt.i64, "burst.count");
      ssa.AddAvailableValue(n.preheader, c0);
      for (Edge &e : n.edges) {
        // Stands for the count at the end of the latch until the definitions are all known.
        auto *now = BinaryOperator::CreateAdd(UndefValue::get(rt.i64), ConstantInt::get(rt.i64, 0), "burst.now");
        Check &c = addCheck(e.header, e.latch, now);
        ssa.AddAvailableValue(c.check, c.step);
        ssa.AddAvailableValue(c.sw, c.reloaded);
        placeholders.push_back({now, e.latch});
      }
      for (auto &[now, latch] : placeholders) {
        now->replaceAllUsesWith(ssa.GetValueAtEndOfBlock(latch));
        now->eraseFromParent();
      }
      for (BasicBlock *E : n.exits) new StoreInst(ssa.GetValueInMiddleOfBlock(E), rt.state, &*E->getFirstInsertionPt());
    }
  }

  // A check on the back-edge latch -> H: the count (`now`, a register count's value at the
  // latch; null: the thread-local word) steps, and when it runs out the runtime is asked.
  Check &addCheck(BasicBlock *H, BasicBlock *latch, Instruction *now) {
    LLVMContext &ctx = F.getContext();
    BasicBlock *chk = BasicBlock::Create(ctx, "burst.check", &F, H);
    BasicBlock *sw = BasicBlock::Create(ctx, "burst.switch", &F, H);
    Instruction *T = latch->getTerminator();
    for (unsigned i = 0; i < T->getNumSuccessors(); i++)
      if (T->getSuccessor(i) == H) T->setSuccessor(i, chk);
    // H's phis: the latch's entry (one, even if it had several edges) now comes from chk.
    for (PHINode &P : H->phis()) {
      int first = P.getBasicBlockIndex(latch);
      P.setIncomingBlock(first, chk);
      for (int i = P.getNumIncomingValues() - 1; i > first; i--)
        if (P.getIncomingBlock(i) == latch) P.removeIncomingValue(i, false);
    }
    IRBuilder<> b(chk);
    Value *before = now ? static_cast<Value *>(b.Insert(now)) : b.CreateLoad(rt.i64, rt.state, "burst.s");
    auto *step = cast<Instruction>(b.CreateAdd(before, ConstantInt::get(rt.i64, -1), "burst.next"));
    if (!now) b.CreateStore(step, rt.state);
    auto *expired = cast<ICmpInst>(b.CreateICmpSLE(step, ConstantInt::get(rt.i64, 0)));
    b.CreateCondBr(expired, sw, H);
    IRBuilder<> s(sw);
    if (now) s.CreateStore(step, rt.state);
    CallInst *call = s.CreateCall(rt.switchFn, {rt.state, ConstantInt::getFalse(ctx), ConstantInt::get(rt.i64, rt.set.on),
                                               ConstantInt::get(rt.i64, rt.set.off)});
    Instruction *reloaded = now ? s.CreateLoad(rt.i64, rt.state, "burst.count.re") : nullptr;
    s.CreateBr(H);
    for (PHINode &P : H->phis()) P.addIncoming(P.getIncomingValueForBlock(chk), sw);
    checks.push_back({H, chk, sw, step, expired, call, reloaded});
    return checks.back();
  }

  // The burst copy counts up; each switch block may jump to either copy's header.
  void joinCopies(ValueToValueMapTy &vmap) {
    LLVMContext &ctx = F.getContext();
    for (Check &c : checks) {
      auto *step = cast<Instruction>(vmap[c.step]);
      step->setOperand(1, ConstantInt::get(rt.i64, 1));
      cast<ICmpInst>(vmap[c.expired])->setPredicate(CmpInst::ICMP_SGE);
      auto *call = cast<CallInst>(vmap[c.call]);
      call->setArgOperand(1, ConstantInt::getTrue(ctx));
      auto *H2 = cast<BasicBlock>(vmap[c.header]);
      auto *sw2 = cast<BasicBlock>(vmap[c.sw]);
      // plain switch: true -> burst header; burst switch: false -> plain header.
      SmallVector<std::pair<PHINode *, Value *>, 8> toBurst, toPlain;
      for (PHINode &P : c.header->phis()) {
        auto *P2 = cast<PHINode>(vmap[&P]);
        toBurst.push_back({P2, P.getIncomingValueForBlock(c.sw)});
        toPlain.push_back({&P, P2->getIncomingValueForBlock(sw2)});
      }
      for (auto &[P2, v] : toBurst) P2->addIncoming(v, c.sw);
      for (auto &[P, v] : toPlain) P->addIncoming(v, sw2);
      c.sw->getTerminator()->eraseFromParent();
      BranchInst::Create(H2, c.header, c.call, c.sw);
      sw2->getTerminator()->eraseFromParent();
      BranchInst::Create(H2, c.header, call, sw2);
    }
  }

  // Uses a back-edge jump left without a dominating definition: through phis of the value
  // and its copy.
  void repair(ArrayRef<BasicBlock *> originals, ValueToValueMapTy &vmap) {
    DominatorTree DT(F);
    SmallVector<Use *, 8> bad;
    for (BasicBlock *BB : originals) {
      for (Instruction &I : *BB) {
        if (I.getType()->isVoidTy()) continue;
        auto it = vmap.find(&I);
        if (it == vmap.end()) continue;
        auto *I2 = cast<Instruction>(it->second);
        bad.clear();
        for (Use &U : I.uses())
          if (!DT.dominates(&I, U)) bad.push_back(&U);
        for (Use &U : I2->uses())
          if (!DT.dominates(I2, U)) bad.push_back(&U);
        if (bad.empty()) continue;
        SSAUpdater ssa;
        ssa.Initialize(I.getType(), I.getName());
        ssa.AddAvailableValue(I.getParent(), &I);
        ssa.AddAvailableValue(I2->getParent(), I2);
        for (Use *U : bad) ssa.RewriteUse(*U);
      }
    }
  }
};

struct BurstPass : PassInfoMixin<BurstPass> {
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    Runtime rt;
    rt.set = setting();
    LLVMContext &ctx = M.getContext();
    rt.i64 = Type::getInt64Ty(ctx);
    rt.i8p = Type::getInt8PtrTy(ctx);
    // 0: a thread's first check asks the runtime, which draws its phase (never, with ON = 0).
    int64_t initial = rt.set.on == 0 ? INT64_MAX : 0;
    auto *state = dyn_cast_or_null<GlobalVariable>(M.getNamedValue("__sharemap_burst_state"));
    if (!state) {
      state = new GlobalVariable(M, rt.i64, false, GlobalValue::LinkOnceODRLinkage, ConstantInt::get(rt.i64, initial),
                                 "__sharemap_burst_state", nullptr, GlobalValue::InitialExecTLSModel);
      state->setVisibility(GlobalValue::HiddenVisibility);
      state->setComdat(M.getOrInsertComdat("__sharemap_burst_state"));
    }
    rt.state = state;
    Type *voidTy = Type::getVoidTy(ctx);
    rt.switchFn = M.getOrInsertFunction("__sharemap_burst_switch", Type::getInt1Ty(ctx), PointerType::getUnqual(rt.i64),
                                        Type::getInt1Ty(ctx), rt.i64, rt.i64);
    const char *sizes[5] = {"1", "2", "4", "8", "16"};
    for (int k = 0; k < 5; k++) {
      rt.read[k] = M.getOrInsertFunction(std::string("__tsan_read") + sizes[k], voidTy, rt.i8p);
      rt.write[k] = M.getOrInsertFunction(std::string("__tsan_write") + sizes[k], voidTy, rt.i8p);
    }
    rt.readRange = M.getOrInsertFunction("__tsan_read_range", voidTy, rt.i8p, rt.i64);
    rt.writeRange = M.getOrInsertFunction("__tsan_write_range", voidTy, rt.i8p, rt.i64);
    rt.memcpy = M.getOrInsertFunction("memcpy", rt.i8p, rt.i8p, rt.i8p, rt.i64);
    rt.memmove = M.getOrInsertFunction("memmove", rt.i8p, rt.i8p, rt.i8p, rt.i64);
    rt.memset = M.getOrInsertFunction("memset", rt.i8p, rt.i8p, Type::getInt32Ty(ctx), rt.i64);
    // The recorder tells a burst-sampled build by this string.
    auto *markerInit = ConstantDataArray::getString(ctx, "sharemap-burst-v1");
    if (!M.getNamedValue("__sharemap_burst_marker")) {
      auto *marker = new GlobalVariable(M, markerInit->getType(), true, GlobalValue::LinkOnceODRLinkage, markerInit,
                                        "__sharemap_burst_marker");
      marker->setVisibility(GlobalValue::HiddenVisibility);
      marker->setComdat(M.getOrInsertComdat("__sharemap_burst_marker"));
      appendToUsed(M, {marker});
    }
    bool changed = false;
    SmallVector<Function *, 32> work;
    for (Function &F : M)
      if (!F.isDeclaration() && !isOurs(F) && !F.hasFnAttribute(Attribute::Naked) &&
          !F.hasFnAttribute(Attribute::DisableSanitizerInstrumentation))
        work.push_back(&F);
    for (Function *F : work) changed |= Burst(*F, rt).run();
    // The runtime learns at start that libc's memory functions are to be recorded only
    // inside bursts.
    FunctionCallee announce = M.getOrInsertFunction("__sharemap_burst_build", voidTy);
    Function *ctor = Function::Create(FunctionType::get(voidTy, false), GlobalValue::InternalLinkage,
                                      "sharemap.burst.announce", M);
    IRBuilder<> c(BasicBlock::Create(ctx, "", ctor));
    c.CreateCall(announce);
    c.CreateRetVoid();
    appendToGlobalCtors(M, ctor, 0);
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "sharemap-burst", "1", [](PassBuilder &PB) {
            PB.registerOptimizerLastEPCallback(
                [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(BurstPass()); });
          }};
}
