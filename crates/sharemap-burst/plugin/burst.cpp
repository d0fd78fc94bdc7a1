// sharemap's burst-sampling pass (clang -fpass-plugin=libsharemap_burst.so).
//
// Arnold and Ryder's scheme: after the optimiser, each function with memory accesses gets a
// second, instrumented copy of its body. One thread-local word decides which copy runs:
// positive, plain code counting down to the next burst; negative, a burst counting up to
// its end. Function entries dispatch on its sign; loop back-edges count, and when the count
// runs out call the runtime, which starts or ends a burst, and jump to the header of the
// copy that is now due. The plain copy is the optimised code itself, checks added.
//
// Counting: a nest of loops without calls keeps the count in a register (loaded before the
// nest, stored back at its exits), so a vectorised loop pays an add and a branch per
// iteration; any other loop counts in the thread-local word at each back-edge. A loop with
// no loop and no call inside and at most 64 iterations (as scalar evolution bounds it: a
// blocked product's inner loops, a vectorised loop's remainder) is not counted: it runs as
// part of the body of the loop around it, whose back-edge counts.
//
// After the copies are wired together, a value defined in one copy may reach a block of
// the other through a back-edge jump: every such use is rewritten through SSAUpdater,
// with the value and its copy as the two definitions.
//
// Settings come from the environment of the compiler (sharemap cc sets them):
// SHAREMAP_BURST=ON:OFF, back-edges per burst and between bursts (ON = 0: never).

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Triple.h"
#include "llvm/Analysis/CaptureTracking.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
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
  // The back-edge checks' way in: the same function behind a thunk that keeps the registers
  // (x86-64; elsewhere the function itself).
  FunctionCallee switchSaving;
  CallingConv::ID savingConv = CallingConv::C;
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
    CallInst *c = k >= 0 ? b.CreateCall(rt.read[k], {p}) : b.CreateCall(rt.readRange, {p, len});
    c->setCallingConv(rt.savingConv);
  }
  if (a.write) {
    CallInst *c = k >= 0 ? b.CreateCall(rt.write[k], {p}) : b.CreateCall(rt.writeRange, {p, len});
    c->setCallingConv(rt.savingConv);
  }
}

bool isRealCall(const Instruction &I) {
  auto *C = dyn_cast<CallBase>(&I);
  if (!C) return false;
  // Intrinsics that become calls into libc touch no sharemap state.
  if (isa<IntrinsicInst>(C)) return false;
  return !C->isInlineAsm() || C->mayHaveSideEffects();
}

bool callFree(const Loop *L) {
  for (BasicBlock *BB : L->blocks())
    for (Instruction &I : *BB)
      if (isRealCall(I)) return false;
  return true;
}

// Loops too short to count (see the top). They are found before the vectoriser runs, while
// a blocked loop's bound is still `i < ii + B && i < n` (the vector loop's, computed through
// a remainder, no longer bounds), and marked with a loop property that the vectoriser and
// the unroller carry to the loops they make of it.
const char *const ShortLoop = "sharemap.burst.short";
constexpr unsigned MaxShortTrips = 64;

// Whether scalar evolution bounds L, with no loop and no call inside, to a short loop.
bool boundedShort(Loop *L, ScalarEvolution &SE) {
  if (!L->getSubLoops().empty() || !callFree(L)) return false;
  unsigned trips = SE.getSmallConstantMaxTripCount(L);
  return trips > 0 && trips <= MaxShortTrips;
}

struct MarkShortLoops : PassInfoMixin<MarkShortLoops> {
  PreservedAnalyses run(Function &F, FunctionAnalysisManager &FAM) {
    LoopInfo &LI = FAM.getResult<LoopAnalysis>(F);
    ScalarEvolution &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
    for (Loop *L : LI.getLoopsInPreorder())
      if (boundedShort(L, SE)) addStringMetadataToLoop(L, ShortLoop);
    // Metadata only: every analysis holds.
    return PreservedAnalyses::all();
  }
};

// The headers of the loops that get no check: marked short, or bounded so now.
SmallPtrSet<BasicBlock *, 8> shortLoops(Function &F, FunctionAnalysisManager &FAM) {
  SmallPtrSet<BasicBlock *, 8> headers;
  LoopInfo &LI = FAM.getResult<LoopAnalysis>(F);
  ScalarEvolution &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
  for (Loop *L : LI.getLoopsInPreorder()) {
    bool marked = L->getSubLoops().empty() && callFree(L) && findStringMetadataForLoop(L, ShortLoop).hasValue();
    if (marked || boundedShort(L, SE)) headers.insert(L->getHeader());
  }
  return headers;
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

// A back-edge check: the block on the edge latch -> header that steps the count, and the
// block that calls the runtime when it runs out.
struct Check {
  BasicBlock *check, *slow;
  Instruction *step;     // the add of -1 (plain) or +1 (burst)
  ICmpInst *going;       // count still > 0 (plain) or < 0 (burst): no call
  CallInst *call;        // the runtime's switch; its second argument says which copy calls
  Instruction *reloaded; // a register count's value after the switch (null: in the word)
};

// A loop's dispatch block: every entry into the loop, and every return from the runtime,
// goes through it to the header of the copy the count's sign names. Shared by both copies
// (not copied), it is the single entry of every cycle that crosses between them, so the
// joined CFG stays reducible and the code generator still sees loops.
struct Dispatch {
  BasicBlock *block, *header;
  ICmpInst *inBurst; // count < 0
};

class Burst {
public:
  Burst(Function &F, Runtime &rt, SmallPtrSet<BasicBlock *, 8> uncounted)
      : F(F), rt(rt), DL(F.getParent()->getDataLayout()), uncounted(std::move(uncounted)) {}

  bool run() {
    SmallVector<Access, 32> accesses;
    collect(F, DL, accesses);
    if (accesses.empty()) return false;
    bool join = joinable(F);
    BasicBlock *start = splitEntry();
    if (join) addChecks();
    // Copy every block but the new entry (with the static allocas) and the dispatch blocks,
    // which both copies share.
    SmallPtrSet<BasicBlock *, 16> shared;
    shared.insert(entry);
    for (Dispatch &d : dispatches) shared.insert(d.block);
    ValueToValueMapTy vmap;
    SmallVector<BasicBlock *, 32> originals, copies;
    for (BasicBlock &BB : F)
      if (!shared.count(&BB)) originals.push_back(&BB);
    for (BasicBlock *BB : originals) {
      BasicBlock *C = CloneBasicBlock(BB, vmap, ".burst", &F);
      vmap[BB] = C;
      copies.push_back(C);
    }
    remapInstructionsInBlocks(copies, vmap);
    dispatchEntry(start, cast<BasicBlock>(vmap[start]));
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
  // The headers of the loops that get no check (`shortLoops`).
  SmallPtrSet<BasicBlock *, 8> uncounted;
  BasicBlock *entry = nullptr;
  std::deque<Check> checks; // stable addresses: addCheck returns a reference
  SmallVector<Dispatch, 8> dispatches;

  // A new entry block holding the static allocas, then an empty block (copied) before the
  // old entry's code: the entry's dispatch goes to it or its copy.
  BasicBlock *splitEntry() {
    BasicBlock *old = &F.getEntryBlock();
    entry = BasicBlock::Create(F.getContext(), "burst.entry", &F, old);
    BasicBlock *start = BasicBlock::Create(F.getContext(), "burst.start", &F, old);
    BranchInst::Create(old, start);
    SmallVector<AllocaInst *, 8> allocas;
    for (Instruction &I : *old)
      if (auto *A = dyn_cast<AllocaInst>(&I))
        if (A->isStaticAlloca()) allocas.push_back(A);
    BranchInst *br = BranchInst::Create(start, entry);
    for (AllocaInst *A : allocas) A->moveBefore(br);
    return start;
  }

  // The entry dispatches on the sign of the state; 0, a thread's first check, asks the
  // runtime (which draws the thread's phase).
  void dispatchEntry(BasicBlock *plain, BasicBlock *burst) {
    LLVMContext &ctx = F.getContext();
    BasicBlock *notPlain = BasicBlock::Create(ctx, "burst.entry.other", &F, plain);
    BasicBlock *ask = BasicBlock::Create(ctx, "burst.entry.first", &F, plain);
    IRBuilder<> b(entry->getTerminator());
    Value *s = b.CreateLoad(rt.i64, rt.state, "burst.state");
    b.CreateCondBr(b.CreateICmpSLE(s, ConstantInt::get(rt.i64, 0)), notPlain, plain);
    entry->getTerminator()->eraseFromParent();
    IRBuilder<> o(notPlain);
    o.CreateCondBr(o.CreateICmpEQ(s, ConstantInt::get(rt.i64, 0)), ask, burst);
    IRBuilder<> a(ask);
    a.CreateCondBr(a.CreateCall(rt.switchFn, {rt.state, ConstantInt::getFalse(ctx), ConstantInt::get(rt.i64, rt.set.on),
                                              ConstantInt::get(rt.i64, rt.set.off)}),
                   burst, plain);
  }

  Value *placeholder(Type *t, Instruction *before, const Twine &name) {
    return new FreezeInst(UndefValue::get(t), name, before);
  }

  // Counts at each loop's back-edges (in the original, before it is copied). A nest of
  // loops without calls keeps one count in a register for all its back-edges (loaded before
  // the nest, stored at its exits): the optimiser's blocked loops run inner loops of a few
  // iterations, and a round trip through the thread-local word at each made a matrix
  // product 1.5 times slower. Other loops count in the word itself.
  void addChecks() {
    auto isRoot = [&](Loop *L) { return callFree(L) && (!L->getParentLoop() || !callFree(L->getParentLoop())); };
    {
      // The optimiser leaves loops without a preheader or with shared exits: a nest's
      // outermost loop gets both, to load its count before and store it after.
      DominatorTree DT(F);
      LoopInfo LI(DT);
      for (Loop *L : LI.getLoopsInPreorder()) {
        if (!isRoot(L) || uncounted.count(L->getHeader())) continue;
        if (!L->getLoopPreheader()) InsertPreheaderForLoop(L, &DT, &LI, nullptr, false);
        if (!L->hasDedicatedExits()) formDedicatedExitBlocks(L, &DT, &LI, nullptr, false);
      }
    }
    // Every loop looked at on the CFG as it is now, before any check is added.
    struct Plan {
      BasicBlock *header;
      SmallVector<BasicBlock *, 4> latches, outside;
      bool innermost;
      int nest; // the register nest it belongs to (-1: counts in the word)
    };
    struct Nest {
      BasicBlock *preheader;
      SmallVector<BasicBlock *, 4> exits;
    };
    SmallVector<Plan, 8> plans;
    SmallVector<Nest, 4> nests;
    {
      DominatorTree DT(F);
      LoopInfo LI(DT);
      DenseMap<Loop *, int> nestOf;
      for (Loop *L : LI.getLoopsInPreorder()) {
        if (uncounted.count(L->getHeader())) continue;
        Plan p{L->getHeader(), {}, {}, L->getSubLoops().empty(), -1};
        L->getLoopLatches(p.latches);
        for (BasicBlock *pred : predecessors(L->getHeader()))
          if (!L->contains(pred) && !is_contained(p.outside, pred)) p.outside.push_back(pred);
        if (callFree(L)) {
          if (isRoot(L) && L->getLoopPreheader() && L->hasDedicatedExits()) {
            nestOf[L] = nests.size();
            Nest n{L->getLoopPreheader(), {}};
            L->getUniqueExitBlocks(n.exits);
            nests.push_back(std::move(n));
          } else if (!isRoot(L)) {
            auto it = nestOf.find(L->getParentLoop());
            if (it != nestOf.end()) nestOf[L] = it->second;
          }
          auto it = nestOf.find(L);
          if (it != nestOf.end()) p.nest = it->second;
        }
        plans.push_back(std::move(p));
      }
    }
    // Each nest's count is one variable: its value at each point is found by SSAUpdater
    // from where it is set (before the nest, at each check and switch).
    SmallVector<std::unique_ptr<SSAUpdater>, 4> counts;
    SmallVector<SmallVector<std::pair<Value *, BasicBlock *>, 8>, 4> placeholders(nests.size());
    for (Nest &n : nests) {
      IRBuilder<> pre(n.preheader->getTerminator());
      Value *c0 = pre.CreateLoad(rt.i64, rt.state, "burst.count0");
      counts.push_back(std::make_unique<SSAUpdater>());
      counts.back()->Initialize(rt.i64, "burst.count");
      counts.back()->AddAvailableValue(n.preheader, c0);
    }
    // The header's phis are rebuilt once its new predecessors are in place: meanwhile a
    // placeholder stands for each, with the values its edges brought.
    struct Rebuilt {
      Value *stand;
      BasicBlock *header;
      // Handles: a value that is itself a placeholder follows it when it is replaced.
      SmallVector<std::pair<BasicBlock *, WeakTrackingVH>, 4> incoming;
    };
    SmallVector<Rebuilt, 16> rebuilt;
    SmallVector<PHINode *, 16> phis;
    for (Plan &p : plans) {
      for (PHINode &P : p.header->phis()) {
        phis.push_back(&P);
        rebuilt.push_back({placeholder(P.getType(), &*p.header->getFirstInsertionPt(), P.getName()), p.header, {}});
      }
    }
    // Every phi replaced before any is read: one may bring another.
    for (unsigned i = 0; i < phis.size(); i++) phis[i]->replaceAllUsesWith(rebuilt[i].stand);
    for (unsigned i = 0; i < phis.size(); i++) {
      PHINode *P = phis[i];
      for (unsigned k = 0; k < P->getNumIncomingValues(); k++)
        rebuilt[i].incoming.push_back({P->getIncomingBlock(k), WeakTrackingVH(P->getIncomingValue(k))});
    }
    for (PHINode *P : phis) P->eraseFromParent();
    for (Plan &p : plans) {
      LLVMContext &ctx = F.getContext();
      BasicBlock *d = BasicBlock::Create(ctx, "burst.dispatch", &F, p.header);
      for (BasicBlock *pred : p.outside) {
        Instruction *T = pred->getTerminator();
        for (unsigned i = 0; i < T->getNumSuccessors(); i++)
          if (T->getSuccessor(i) == p.header) T->setSuccessor(i, d);
      }
      Value *stand = p.nest >= 0 ? placeholder(rt.i64, BranchInst::Create(p.header, d), "burst.at.dispatch") : nullptr;
      if (p.nest < 0) BranchInst::Create(p.header, d);
      IRBuilder<> b(d->getTerminator());
      Value *c = stand ? stand : b.CreateLoad(rt.i64, rt.state, "burst.s");
      auto *inBurst = cast<ICmpInst>(b.CreateICmpSLT(c, ConstantInt::get(rt.i64, 0), "burst.in"));
      dispatches.push_back({d, p.header, inBurst});
      if (stand) placeholders[p.nest].push_back({stand, nullptr});
      for (BasicBlock *latch : p.latches) {
        Value *now = p.nest >= 0 ? placeholder(rt.i64, latch->getTerminator(), "burst.now") : nullptr;
        Check &k = addCheck(p.header, d, latch, now, p.innermost);
        if (p.nest >= 0) {
          counts[p.nest]->AddAvailableValue(k.check, k.step);
          counts[p.nest]->AddAvailableValue(k.slow, k.reloaded);
          placeholders[p.nest].push_back({now, latch});
        }
      }
    }
    for (Rebuilt &r : rebuilt) {
      SSAUpdater ssa;
      ssa.Initialize(r.stand->getType(), r.stand->getName());
      for (auto &[block, value] : r.incoming) ssa.AddAvailableValue(block, value);
      Value *v = ssa.GetValueInMiddleOfBlock(r.header);
      // A phi that only ever brought itself has no value.
      r.stand->replaceAllUsesWith(v == r.stand ? UndefValue::get(v->getType()) : v);
    }
    for (Rebuilt &r : rebuilt) cast<Instruction>(r.stand)->eraseFromParent();
    for (unsigned n = 0; n < nests.size(); n++) {
      for (auto &[stand, latch] : placeholders[n]) {
        auto *I = cast<Instruction>(stand);
        // At a latch: the count at its end; at a dispatch block: the count entering it.
        Value *v = latch ? counts[n]->GetValueAtEndOfBlock(latch) : counts[n]->GetValueInMiddleOfBlock(I->getParent());
        I->replaceAllUsesWith(v);
        I->eraseFromParent();
      }
      for (BasicBlock *E : nests[n].exits)
        new StoreInst(counts[n]->GetValueInMiddleOfBlock(E), rt.state, &*E->getFirstInsertionPt());
    }
  }

  // A check on the back-edge latch -> header: the count (`now`, a register count's value
  // at the end of the latch; null: the thread-local word) steps; while it goes on, an
  // innermost loop goes straight back to its header, an outer one through its dispatch;
  // when it runs out the runtime is asked, and the dispatch picks the copy.
  Check &addCheck(BasicBlock *header, BasicBlock *dispatch, BasicBlock *latch, Value *now, bool innermost) {
    LLVMContext &ctx = F.getContext();
    BasicBlock *chk = BasicBlock::Create(ctx, "burst.check", &F, header);
    BasicBlock *slow = BasicBlock::Create(ctx, "burst.switch", &F, header);
    Instruction *T = latch->getTerminator();
    for (unsigned i = 0; i < T->getNumSuccessors(); i++)
      if (T->getSuccessor(i) == header) T->setSuccessor(i, chk);
    IRBuilder<> b(chk);
    Value *before = now ? now : b.CreateLoad(rt.i64, rt.state, "burst.s");
    auto *step = cast<Instruction>(b.CreateAdd(before, ConstantInt::get(rt.i64, -1), "burst.next"));
    if (!now) b.CreateStore(step, rt.state);
    auto *going = cast<ICmpInst>(b.CreateICmpSGT(step, ConstantInt::get(rt.i64, 0)));
    b.CreateCondBr(going, innermost ? header : dispatch, slow);
    IRBuilder<> s(slow);
    if (now) s.CreateStore(step, rt.state);
    CallInst *call = s.CreateCall(rt.switchSaving, {rt.state, ConstantInt::getFalse(ctx), ConstantInt::get(rt.i64, rt.set.on),
                                               ConstantInt::get(rt.i64, rt.set.off)});
    call->setCallingConv(rt.savingConv);
    Instruction *reloaded = now ? s.CreateLoad(rt.i64, rt.state, "burst.count.re") : nullptr;
    s.CreateBr(dispatch);
    checks.push_back({chk, slow, step, going, call, reloaded});
    return checks.back();
  }

  // The burst copy counts up; each dispatch block, shared, takes the copies' edges too and
  // picks the header by the count's sign.
  void joinCopies(ValueToValueMapTy &vmap) {
    LLVMContext &ctx = F.getContext();
    for (Check &c : checks) {
      cast<Instruction>(vmap[c.step])->setOperand(1, ConstantInt::get(rt.i64, 1));
      cast<ICmpInst>(vmap[c.going])->setPredicate(CmpInst::ICMP_SLT);
      cast<CallInst>(vmap[c.call])->setArgOperand(1, ConstantInt::getTrue(ctx));
    }
    for (Dispatch &d : dispatches) {
      // Its phis get the copies' predecessors, with the copies' values.
      for (PHINode &P : d.block->phis()) {
        SmallVector<std::pair<Value *, BasicBlock *>, 4> added;
        for (unsigned i = 0; i < P.getNumIncomingValues(); i++) {
          auto it = vmap.find(P.getIncomingBlock(i));
          if (it == vmap.end()) continue;
          auto vt = vmap.find(P.getIncomingValue(i));
          added.push_back({vt == vmap.end() ? P.getIncomingValue(i) : static_cast<Value *>(vt->second),
                           cast<BasicBlock>(it->second)});
        }
        for (auto &[v, b] : added) P.addIncoming(v, b);
      }
      d.block->getTerminator()->eraseFromParent();
      BranchInst::Create(cast<BasicBlock>(vmap[d.header]), d.header, d.inBurst, d.block);
    }
  }

  // Uses the joined copies left without a dominating definition: through phis of the value
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
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &MAM) {
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
    // x86-64: the runtime's calls keep the registers (`preserve_most`, see the runtime's burst.rs).
    bool saving = Triple(M.getTargetTriple()).getArch() == Triple::x86_64;
    rt.switchFn = M.getOrInsertFunction("__sharemap_burst_switch", Type::getInt1Ty(ctx), PointerType::getUnqual(rt.i64),
                                        Type::getInt1Ty(ctx), rt.i64, rt.i64);
    rt.switchSaving = rt.switchFn;
    if (saving) {
      rt.switchSaving = M.getOrInsertFunction("__sharemap_burst_switch_saving", rt.switchFn.getFunctionType());
      rt.savingConv = CallingConv::PreserveMost;
      if (auto *f = dyn_cast<Function>(rt.switchSaving.getCallee())) f->setCallingConv(rt.savingConv);
    }
    const char *sizes[5] = {"1", "2", "4", "8", "16"};
    // The access callbacks: ThreadSanitizer's, or on x86-64 the runtime's thunks that keep
    // the registers (see the runtime's burst.rs).
    std::string prefix = saving ? "__sharemap_burst_" : "__tsan_";
    auto callback = [&](const std::string &name, ArrayRef<Type *> params) {
      FunctionCallee f = M.getOrInsertFunction(prefix + name, FunctionType::get(voidTy, params, false));
      if (auto *fn = dyn_cast<Function>(f.getCallee()); fn && saving) fn->setCallingConv(CallingConv::PreserveMost);
      return f;
    };
    for (int k = 0; k < 5; k++) {
      rt.read[k] = callback(std::string("read") + sizes[k], {rt.i8p});
      rt.write[k] = callback(std::string("write") + sizes[k], {rt.i8p});
    }
    rt.readRange = callback("read_range", {rt.i8p, rt.i64});
    rt.writeRange = callback("write_range", {rt.i8p, rt.i64});
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
    FunctionAnalysisManager &FAM = MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
    for (Function *F : work) changed |= Burst(*F, rt, shortLoops(*F, FAM)).run();
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
            PB.registerVectorizerStartEPCallback(
                [](FunctionPassManager &FPM, OptimizationLevel) { FPM.addPass(MarkShortLoops()); });
            PB.registerOptimizerLastEPCallback(
                [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(BurstPass()); });
          }};
}
