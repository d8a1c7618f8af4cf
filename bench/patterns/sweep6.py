# PyTorch twin of sweep6.cpp (same cases, names and sizes); tools/patterns.sh runs both.
import torch, time, sys, math
import torch.nn.functional as F
from pattern_common import leaf, run_patterns
cases=[]
def add(n,f): cases.append((n,f))
xi=leaf(64,256); h0=leaf(64,256); Wl=leaf(256,1024); Ul=leaf(256,1024); bl=leaf(1024)
def lstm():
    h=h0; c=torch.zeros(64,256)
    for t in range(16):
        g=(xi@Wl+h@Ul+bl).chunk(4,-1)
        c=torch.sigmoid(g[1])*c+torch.sigmoid(g[0])*torch.tanh(g[2])
        h=torch.sigmoid(g[3])*torch.tanh(c)
    h.sum().backward()
add("lstm_prims_16", lstm)
Wg=leaf(256,768); Ug=leaf(256,768)
def gru():
    h=h0
    for t in range(16):
        gx=(xi@Wg).chunk(3,-1); gh=(h@Ug).chunk(3,-1)
        r=torch.sigmoid(gx[0]+gh[0]); z=torch.sigmoid(gx[1]+gh[1])
        n=torch.tanh(gx[2]+r*gh[2]); h=(1.0-z)*n+z*h
    h.sum().backward()
add("gru_prims_16", gru)
fm=leaf(16,64,32,32); cwc=leaf(64); cbc=leaf(64)
def bn():
    m=fm.mean((0,2,3),keepdim=True); v=fm.var((0,2,3),unbiased=False,keepdim=True)
    ((fm-m)/torch.sqrt(v+1e-5)*cwc.view(1,64,1,1)+cbc.view(1,64,1,1)).sum().backward()
add("batchnorm_prims", bn)
x=leaf(8,512,256); w=leaf(256)
add("rmsnorm_prims", lambda: (x*torch.rsqrt((x*x).mean(-1,keepdim=True)+1e-6)*w).sum().backward())
dwk=leaf(64,1,3,3)
add("depthwise_conv3x3", lambda: F.conv2d(fm,dwk,padding=1,groups=64).sum().backward())
add("bilinear_up2x", lambda: F.interpolate(fm,scale_factor=2.0,mode="bilinear").sum().backward())
lg=leaf(4096,256); tg=torch.randint(0,256,(4096,))
def lsce():
    lp=torch.log_softmax(lg,-1); nll=-torch.gather(lp,1,tg.unsqueeze(1)).squeeze(1)
    (0.9*nll-0.1*lp.mean(-1)).mean().backward()
add("label_smooth_ce", lsce)
lg2=leaf(4096,256)
add("kl_div_distill", lambda: F.kl_div(torch.log_softmax(lg,-1),torch.softmax(lg2,-1),reduction="batchmean").backward())
gate=leaf(4096,64)
def moe():
    p=torch.softmax(gate,-1); v,i=torch.topk(p,2,-1); (v/v.sum(-1,keepdim=True)).sum().backward()
add("moe_top2_gating", moe)
ca=leaf(4096,256); cb=leaf(4096,256)
add("cosine_sim", lambda: ((ca*cb).sum(-1)/(ca.norm(2,-1)*cb.norm(2,-1)+1e-8)).sum().backward())
add("max_dim_values", lambda: lg.max(-1).values.sum().backward())
sq=leaf(1024,1024)
add("cumsum_last", lambda: torch.cumsum(sq,-1).sum().backward())
add("cumsum_dim0", lambda: torch.cumsum(sq,0).sum().backward())
add("logsumexp_dim0", lambda: torch.logsumexp(sq,0).sum().backward())
table=leaf(10000,256); idx=torch.randint(0,10000,(4096,))
add("index_select_rows", lambda: torch.index_select(table,0,idx).sum().backward())
add("sum_dims_023", lambda: fm.sum((0,2,3)).sum().backward())
add("group_norm_8", lambda: F.group_norm(fm,8,cwc,cbc).sum().backward())
add("instance_norm", lambda: F.instance_norm(fm,weight=cwc,bias=cbc).sum().backward())
ct_in=leaf(16,64,16,16); ctw=leaf(64,32,4,4)
add("conv_transpose_s2", lambda: F.conv_transpose2d(ct_in,ctw,stride=2,padding=1).sum().backward())
add("unfold_3x3", lambda: F.unfold(fm,3,padding=1).sum().backward())
add("softplus", lambda: F.softplus(sq).sum().backward())
pa=leaf(512,128); pb=leaf(512,128)
def pdist():
    a2=(pa*pa).sum(-1,keepdim=True); b2=(pb*pb).sum(-1,keepdim=True)
    torch.sqrt(torch.clamp(a2+b2.t()-2.0*(pa@pb.t()),1e-12,math.inf)).sum().backward()
add("pairwise_dist", pdist)
so=leaf(1024,256)
add("sort_last", lambda: torch.sort(so,-1).values.sum().backward())
pr=leaf(4096,64)
add("prod_last", lambda: torch.prod(pr,-1).sum().backward())
vv=leaf(4096,256)
add("var_dim0", lambda: vv.var(0).sum().backward())
tgt=torch.randn(1024,1024)
add("mse_loss", lambda: F.mse_loss(sq,tgt).backward())
bt=torch.rand(1024,1024)
add("bce_logits", lambda: F.binary_cross_entropy_with_logits(sq,bt).backward())
seq=leaf(32,128,256)
add("amax_time", lambda: torch.amax(seq,1).sum().backward())
gl=leaf(4096,1024)
def glu():
    a,b=gl.chunk(2,-1); (a*torch.sigmoid(b)).sum().backward()
add("glu_by_hand", glu)
add("pow3", lambda: torch.pow(sq,3.0).sum().backward())
add("pow_half_abs", lambda: torch.pow(sq.abs()+1.0,0.5).sum().backward())
add("l1_loss", lambda: F.l1_loss(sq,tgt).backward())
def acc():
    with torch.no_grad(): (torch.argmax(lg,-1)==tg).float().mean()
add("argmax_acc", acc)
add("one_hot_mse", lambda: (torch.softmax(lg,-1)-F.one_hot(tg,256).float()).pow(2.0).mean().backward())
st=[leaf(256,256) for i in range(8)]
add("stack8", lambda: torch.stack(st,0).sum().backward())
run_patterns(cases)
