# PyTorch twin of sweep5.cpp (same cases, names and sizes); tools/patterns.sh runs both.
import torch, time, sys, math
import torch.nn.functional as F
from pattern_common import leaf, run_patterns
cases=[]
def add(n,f): cases.append((n,f))
x=leaf(8,512,256); w=leaf(256); bia=leaf(256)
def ln():
    mu=x.mean(-1,keepdim=True); d=x-mu; v=(d*d).mean(-1,keepdim=True)
    (d/torch.sqrt(v+1e-5)*w+bia).sum().backward()
add("layernorm_prims", ln)
add("gelu_tanh_prims", lambda: (0.5*x*(1.0+torch.tanh(0.7978845608*(x+0.044715*x*x*x)))).sum().backward())
fm=leaf(16,64,32,32); l1=leaf(64,16); l2=leaf(16,64)
def se():
    s=fm.mean((2,3)); s=torch.sigmoid(torch.relu(s@l1)@l2); (fm*s.unsqueeze(-1).unsqueeze(-1)).sum().backward()
add("se_block", se)
seq=leaf(32,128,256); mask=(torch.rand(32,128)>0.3).float()
add("masked_mean_pool", lambda: ((seq*mask.unsqueeze(-1)).sum(1)/mask.sum(1,keepdim=True)).sum().backward())
lg=leaf(4096,256); tg=torch.randint(0,256,(4096,))
add("ce_by_hand", lambda: (torch.logsumexp(lg,-1)-torch.gather(lg,1,tg.unsqueeze(1)).squeeze(1)).mean().backward())
def focal():
    p=torch.softmax(lg,-1); pt=torch.gather(p,1,tg.unsqueeze(1)); (-torch.pow(1.0-pt,2.0)*torch.log(pt)).mean().backward()
add("focal_loss", focal)
dd=leaf(1024,1024)
def hub():
    a=dd.abs(); torch.where(a<1.0,0.5*dd*dd,a-0.5).mean().backward()
add("huber_where", hub)
e1=leaf(4096,256)
add("l2_normalize", lambda: (e1/torch.clamp(e1.norm(2,-1,keepdim=True),1e-12,math.inf)).sum().backward())
za=leaf(512,128); zb=leaf(512,128); ar=torch.arange(512)
add("contrastive", lambda: F.cross_entropy(za@zb.t()/0.07, ar).backward())
pe=torch.randn(1024,256)
add("pos_enc_slice_add", lambda: (x+pe[0:512]).sum().backward())
sc=leaf(8,8,256,256); slopes=torch.randn(8); dist=torch.randn(256,256)
add("alibi_bias", lambda: torch.softmax(sc+slopes.view(8,1,1)*dist,-1).sum().backward())
ps=[leaf(256,256) for i in range(8)]
def l2p():
    r=torch.zeros(())
    for p in ps: r=r+torch.pow(p,2).sum()
    (r*1e-4).backward()
add("l2_penalty", l2p)
ema=[torch.randn(256,256) for i in range(8)]
def emau():
    with torch.no_grad():
        for i in range(8): ema[i].mul_(0.999).add_(ps[i].detach(), alpha=0.001)
add("ema_update", emau)
gs=[torch.randn(256,256) for i in range(8)]
def clip():
    with torch.no_grad():
        tot=torch.zeros(())
        for g in gs: tot=tot+torch.pow(g,2).sum()
        c=torch.clamp(1.0/(torch.sqrt(tot)+1e-6),0.0,1.0)
        for g in gs: g.mul_(c)
add("clip_by_hand", clip)
hb=torch.randn(1024,1024).bfloat16().requires_grad_(); hf=leaf(1024,1024)
add("mixed_bf16_fp32_mul", lambda: (hb*hf).sum().backward())
add("bf16_roundtrip", lambda: hf.bfloat16().float().sum().backward())
add("where_scalar_zero", lambda: torch.where(dd>0.0,dd,torch.zeros(())).sum().backward())
ts=leaf(32,256,128); cw=leaf(256,256,3)
add("conv1d_seq", lambda: F.conv1d(ts,cw,padding=1).sum().backward())
add("avg_pool1d", lambda: F.avg_pool1d(ts,2).sum().backward())
add("adaptive_avg_pool1d", lambda: F.adaptive_avg_pool1d(ts,1).sum().backward())
add("channel_shuffle", lambda: fm.view(16,4,16,32,32).transpose(1,2).reshape(16,64,32,32).sum().backward())
an=leaf(4096,128); po=leaf(4096,128); ne=leaf(4096,128)
def trip():
    dap=(an-po).norm(2,-1); dan=(an-ne).norm(2,-1); torch.clamp(dap-dan+1.0,0.0,math.inf).mean().backward()
add("triplet_by_hand", trip)
oa=leaf(64,256); ob=leaf(64,256)
add("outer_bcast", lambda: (oa.unsqueeze(-1)*ob.unsqueeze(-2)).sum().backward())
cp=leaf(1024,1024)
add("cumprod_last", lambda: torch.cumprod(torch.sigmoid(cp),-1).sum().backward())
add("up_nearest2x", lambda: F.interpolate(fm,scale_factor=2.0).sum().backward())
add("max_pool_k3s2p1", lambda: F.max_pool2d(fm,3,stride=2,padding=1).sum().backward())
add("std_lastdim", lambda: x.std(-1).sum().backward())
add("sub_mean_div_std", lambda: ((x-x.mean(0,keepdim=True))/(x.std(0,keepdim=True)+1e-5)).sum().backward())
run_patterns(cases)
