# PyTorch twin of sweep8.cpp (same cases, names and sizes); tools/patterns.sh runs both.
import torch
import torch.nn.functional as F
from pattern_common import leaf, run_patterns
import torch.nn as nn
cases=[]
def add(n,f): cases.append((n,f))
cimg=leaf(64,3,32,32); cw1=leaf(64,3,4,4); cw2=leaf(128,64,4,4); cl=leaf(1,128*8*8)
def cgp():
    xi=cimg.detach().requires_grad_()
    h=F.leaky_relu(F.conv2d(xi,cw1,stride=2,padding=1),0.2)
    h=F.leaky_relu(F.conv2d(h,cw2,stride=2,padding=1),0.2)
    d=F.linear(h.flatten(1),cl)
    g=torch.autograd.grad([d.sum()],[xi],create_graph=True)[0]
    (g.flatten(1).norm(2,1)-1).pow(2.0).mean().backward()
add("conv_critic_gp", cgp)
lstm=nn.LSTM(128,256,batch_first=True); lx=torch.randn(32,64,128)
add("lstm_module", lambda: lstm(lx)[0].sum().backward())
gru=nn.GRU(128,256,batch_first=True)
add("gru_module", lambda: gru(lx)[0].sum().backward())
bn1=nn.BatchNorm1d(256); tab=leaf(4096,256)
add("batchnorm1d_tabular", lambda: bn1(tab).pow(2.0).sum().backward())
mha=nn.MultiheadAttention(256,8,batch_first=True); mx=leaf(16,128,256)
cm=torch.triu(torch.ones(128,128,dtype=torch.bool),1)
add("mha_module", lambda: mha(mx,mx,mx,attn_mask=cm,need_weights=False)[0].sum().backward())
vimg=leaf(32,3,64,64); pw=leaf(192,3,8,8); pb=leaf(192)
add("vit_patch_embed", lambda: F.conv2d(vimg,pw,pb,stride=8).flatten(2).transpose(1,2).sum().backward())
etab=leaf(50000,128); eidx=torch.randint(0,50000,(512,32))
add("embedding_bag_mean", lambda: F.embedding(eidx,etab).mean(1).sum().backward())
dx=leaf(16,64,32,32); dk=leaf(64,64,3,3)
add("dilated_conv", lambda: F.conv2d(dx,dk,padding=2,dilation=2).sum().backward())
huge=leaf(16777216)
add("sum_16M", lambda: huge.sum().backward())
bfw1=torch.randn(784,512).bfloat16().requires_grad_(); bfw2=torch.randn(512,10).bfloat16().requires_grad_()
bfx=torch.randn(256,784).bfloat16(); bft=torch.randint(0,10,(256,))
add("pure_bf16_mlp", lambda: F.cross_entropy(torch.relu(bfx@bfw1)@bfw2,bft).backward())
rx=leaf(64,512); rw=leaf(512,512); rb=leaf(512)
def rmlp():
    h=rx
    for i in range(8): h=h+F.gelu(F.linear(F.layer_norm(h,(512,)),rw,rb))
    h.sum().backward()
add("residual_mlp_x8", rmlp)
sx=leaf(64,512)
def msm():
    h=sx
    for i in range(50): h=torch.tanh(h*0.9+0.1)
    h.sum().backward()
add("many_small_ops", msm)
tq=leaf(8,8,128,32); tk=leaf(8,8,128,32)
add("attn_scores_perm", lambda: torch.softmax((tq@tk.transpose(-2,-1))/5.66,-1).sum().backward())
run_patterns(cases)
