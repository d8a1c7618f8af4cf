# PyTorch twin of sweep4.cpp (same cases, names and sizes); tools/patterns.sh runs both.
import torch, time, sys, math
import torch.nn.functional as F
import os
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
torch.manual_seed(0)
def best(f, reps):
    f()
    b=1e30
    for r in range(5):
        t=time.perf_counter()
        for i in range(reps): f()
        b=min(b,(time.perf_counter()-t)/reps*1e6)
    return b
def leaf(*s): return torch.randn(*s).requires_grad_()
cases=[]
def add(n,f): cases.append((n,f))
x=leaf(8,512,256); w=leaf(256)
add("rmsnorm_prims", lambda: (x*torch.rsqrt((x*x).mean(-1,keepdim=True)+1e-6)*w).sum().backward())
add("rmsnorm_fused", lambda: (x*torch.rsqrt((x*x).mean(-1,keepdim=True)+1e-6)*w).sum().backward())
q=leaf(8,8,512,32); cosv=torch.randn(512,32); sinv=torch.randn(512,32)
def rope():
    a,b=q.chunk(2,-1); rot=torch.cat([-b,a],-1); (q*cosv+rot*sinv).sum().backward()
add("rope", rope)
h=leaf(2048,512); w1=leaf(512,512); w3=leaf(512,512)
add("swiglu_gate", lambda: (F.silu(h)*w3.sum()+F.silu(h)*h).sum().backward())
s=leaf(8,8,128,128); causal=torch.triu(torch.ones(128,128),1).bool()
add("causal_softmax", lambda: torch.softmax(s.masked_fill(causal,-math.inf),-1).sum().backward())
add("tril_mask_build", lambda: torch.tril(torch.ones(512,512)))
logits=leaf(4096,256); tgt=torch.randint(0,256,(4096,))
add("ce_label_smooth", lambda: F.cross_entropy(logits,tgt,label_smoothing=0.1).backward())
add("ce_plain", lambda: F.cross_entropy(logits,tgt).backward())
big=torch.randn(1024,1024)
add("topk_k8_last", lambda: torch.topk(big,8,-1))
add("sort_last", lambda: torch.sort(big,-1))
add("argsort_dim0", lambda: torch.argsort(big,0))
cs=leaf(1024,1024)
add("cumsum_last", lambda: torch.cumsum(cs,-1).sum().backward())
add("cumsum_dim0", lambda: torch.cumsum(cs,0).sum().backward())
a=leaf(4096,256); b=leaf(4096,256)
add("cosine_sim_prims", lambda: ((a*b).sum(-1)/(a.norm(2,-1)*b.norm(2,-1)+1e-8)).sum().backward())
add("abs_sign_sqrt", lambda: (torch.sqrt(cs.abs()+1)*torch.sign(cs)).sum().backward())
add("pow2_mean", lambda: cs.pow(2).mean().backward())
add("stack_3", lambda: torch.stack([a,b,a],0).sum().backward())
def split_cat():
    p=cs.split(256,1); torch.cat([p[3],p[2],p[1],p[0]],1).sum().backward()
add("split_cat", split_cat)
add("clamp_min_max", lambda: torch.clamp(cs,-0.5,0.5).sum().backward())
add("where_scalar", lambda: torch.where(cs>0,cs,cs*0.1).sum().backward())
add("exp_log", lambda: torch.log(torch.exp(cs)+1.0).sum().backward())
def bce():
    p=torch.sigmoid(cs); (-((big>0).float()*torch.log(p+1e-7))).mean().backward()
add("sigmoid_bce_prims", bce)
add("mish", lambda: F.mish(cs).sum().backward())
add("logsigmoid", lambda: F.logsigmoid(cs).sum().backward())
add("erf", lambda: torch.erf(cs).sum().backward())
add("reciprocal", lambda: torch.reciprocal(cs+3.0).sum().backward())
add("softplus", lambda: F.softplus(cs).sum().backward())
add("max_dim_values", lambda: cs.max(1).values.sum().backward())
add("argmax_eq_mean", lambda: (big.argmax(1)==big.argmax(1)).float().mean())
add("one_hot", lambda: F.one_hot(tgt,256))
bb=leaf(64,128,64); bc=leaf(64,64,128)
add("bmm_fwdbwd", lambda: torch.bmm(bb,bc).sum().backward())
bbc=leaf(1,64,128)
add("matmul_bcast", lambda: torch.matmul(bb,bbc).sum().backward())
add("transpose_reshape", lambda: q.transpose(1,2).reshape(8,512,256).sum().backward())
add("var_mean_lastdim", lambda: (x.var(-1,keepdim=True)+x.mean(-1,keepdim=True)).sum().backward())
add("norm_all", lambda: cs.norm(2).backward())
add("expand_mul_sum", lambda: (cs.unsqueeze(0).expand(4,1024,1024)*2.0).sum().backward())
add("neg_sub_div", lambda: ((cs-1.0)/(-cs+3.0)).sum().backward())
filt=sys.argv[1] if len(sys.argv)>1 else ""
for n,f in cases:
    if filt in n: print("%-20s %9.1f us"%(n,best(f,5)))
