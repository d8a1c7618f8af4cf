# PyTorch twin of sweep10.cpp (same cases, names and sizes); tools/patterns.sh runs both.
import torch
import torch.nn.functional as F
from pattern_common import leaf, run_patterns
cases=[]
def add(n,f): cases.append((n,f))
sx=leaf(8,28,28,96); sqkv=leaf(288,96); sproj=leaf(96,96)
def swin():
    w=sx.view(8,4,7,4,7,96).permute(0,1,3,2,4,5).reshape(128,49,96)
    qkv=F.linear(w,sqkv).view(128,49,3,3,32).permute(2,0,3,1,4)
    q,k,v=qkv[0],qkv[1],qkv[2]
    a=torch.softmax((q@k.transpose(-2,-1))*0.17677669529663687,-1)
    o=(a@v).transpose(1,2).reshape(128,49,96)
    o=F.linear(o,sproj).view(8,4,4,7,7,96).permute(0,1,3,2,4,5).reshape(8,28,28,96)
    (o+sx).pow(2.0).mean().backward()
add("swin_window_attn", swin)
mdelta=leaf(4,128,64); mA=leaf(64,16); mB=leaf(4,128,16); mxs=leaf(4,128,64)
def mamba():
    delta=F.softplus(mdelta)
    dA=torch.exp(delta.unsqueeze(-1)*(-torch.exp(mA)))
    dBx=(delta*mxs).unsqueeze(-1)*mB.unsqueeze(2)
    h=torch.cumsum(torch.log(dA+1e-6),1).exp()*torch.cumsum(dBx,1)
    h.sum(-1).pow(2.0).mean().backward()
add("mamba_scan_prims", mamba)
tq=leaf(8,8,128,64); tk=leaf(8,8,128,64); tbias=leaf(32,8); tbucket=torch.randint(0,32,(128,128))
def t5():
    b=F.embedding(tbucket,tbias).permute(2,0,1).unsqueeze(0)
    s=tq@tk.transpose(-2,-1)+b
    torch.softmax(s,-1).pow(2.0).sum().backward()
add("t5_rel_bias", t5)
cx=leaf(8,256,144); cw1=leaf(288,144); cdw=leaf(144,1,31); cw2=leaf(144,144)
def conformer():
    h=F.linear(cx,cw1)
    h=h.narrow(-1,0,144)*torch.sigmoid(h.narrow(-1,144,144))
    h=F.conv1d(h.transpose(1,2),cdw,padding=15,groups=144)
    h=F.silu(F.batch_norm(h,None,None,training=True))
    (F.linear(h.transpose(1,2),cw2)+cx).pow(2.0).mean().backward()
add("conformer_conv", conformer)
platent=leaf(8,64,256); pin=leaf(8,1024,256); pwq=leaf(256,256); pwkv=leaf(512,256)
def perceiver():
    q=F.linear(platent,pwq).view(8,64,4,64).transpose(1,2)
    kv=F.linear(pin,pwkv).view(8,1024,2,4,64).permute(2,0,3,1,4)
    a=torch.softmax((q@kv[0].transpose(-2,-1))*0.125,-1)
    (a@kv[1]).pow(2.0).mean().backward()
add("perceiver_xattn", perceiver)
gq=leaf(8,8,128,64); gk=leaf(8,2,128,64); gv=leaf(8,2,128,64)
gmask=torch.triu(torch.ones(128,128),1).bool()
def gqa():
    k=gk.unsqueeze(2).expand(8,2,4,128,64).reshape(8,8,128,64)
    v=gv.unsqueeze(2).expand(8,2,4,128,64).reshape(8,8,128,64)
    s=torch.masked_fill((gq@k.transpose(-2,-1))*0.125,gmask,-1e30)
    (torch.softmax(s,-1)@v).pow(2.0).mean().backward()
add("gqa_expand", gqa)
ax=torch.randn(4,64,512); aw1=leaf(1024,512); ab1=leaf(1024); aw2=leaf(512,1024)
def accum():
    for i in range(4):
        F.linear(F.gelu(F.linear(ax[i],aw1,ab1)),aw2).pow(2.0).mean().backward()
add("grad_accum_4", accum)
dx=leaf(32,197,192); dw=leaf(192,192); dgamma=leaf(192)
def droppath():
    keep=(torch.rand(32,1,1)<0.9).float()/0.9
    (dx+F.linear(dx,dw)*dgamma*keep).pow(2.0).mean().backward()
add("drop_path_scale", droppath)
gl=leaf(1024,8192)
gt=torch.where(torch.rand(1024)<0.1,torch.full((1024,),-100,dtype=torch.long),torch.randint(0,8192,(1024,)))
add("logit_softcap_ce", lambda: F.cross_entropy(torch.tanh(gl/30.0)*30.0,gt).backward())
we=leaf(8192,256); wh=leaf(256,256)
wids=torch.randint(0,8192,(16,64)); wtgt=torch.randint(0,8192,(1024,))
def tied():
    h=F.gelu(F.linear(F.embedding(wids,we),wh)).reshape(1024,256)
    F.cross_entropy(h@we.t(),wtgt).backward()
add("tied_lm_head", tied)
run_patterns(cases)
