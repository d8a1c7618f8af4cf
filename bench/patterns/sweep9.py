# PyTorch twin of sweep9.cpp (same cases, names and sizes); tools/patterns.sh runs both.
import torch
import torch.nn.functional as F
from pattern_common import leaf, run_patterns
cases=[]
def add(n,f): cases.append((n,f))
bn=lambda t: F.batch_norm(t,None,None,training=True)
mx=leaf(32,32,28,28); me=leaf(192,32,1,1); md=leaf(192,1,3,3); mp=leaf(32,192,1,1)
def mbv2():
    h=F.hardtanh(bn(F.conv2d(mx,me)),0,6)
    h=F.hardtanh(bn(F.conv2d(h,md,padding=1,groups=192)),0,6)
    (bn(F.conv2d(h,mp))+mx).pow(2.0).mean().backward()
add("mbv2_block", mbv2)
cx=leaf(16,96,28,28); cdw=leaf(96,1,7,7); cdb=leaf(96); clw=leaf(96); clb=leaf(96)
c1=leaf(384,96); c1b=leaf(384); c2=leaf(96,384); c2b=leaf(96); cg=leaf(96)
def convnext():
    h=F.conv2d(cx,cdw,cdb,padding=3,groups=96).permute(0,2,3,1)
    h=F.linear(F.gelu(F.linear(F.layer_norm(h,(96,),clw,clb),c1,c1b)),c2,c2b)*cg
    (h.permute(0,3,1,2)+cx).pow(2.0).mean().backward()
add("convnext_block", convnext)
vx=torch.rand(256,784); vw1=leaf(400,784); vb1=leaf(400); vmu=leaf(20,400); vlv=leaf(20,400)
vd1=leaf(400,20); vd2=leaf(784,400); veps=torch.randn(256,20)
def vae():
    h=torch.relu(F.linear(vx,vw1,vb1))
    mu=F.linear(h,vmu); logvar=F.linear(h,vlv)*0.1
    z=mu+torch.exp(logvar*0.5)*veps
    recon=F.linear(torch.relu(F.linear(z,vd1)),vd2)
    bce=F.binary_cross_entropy_with_logits(recon,vx,reduction='sum')
    kl=(1.0+logvar-mu.pow(2.0)-torch.exp(logvar)).sum()*-0.5
    (bce+kl).backward()
add("vae_loss", vae)
aq=leaf(16,8,128,64); ak=leaf(16,8,128,64); av=leaf(16,8,128,64)
apad=torch.rand(16,1,1,128)<0.1
def attn():
    s=torch.masked_fill((aq@ak.transpose(-2,-1))*0.125,apad,float('-inf'))
    (F.dropout(torch.softmax(s,-1),0.1)@av).sum().backward()
add("attn_key_padding", attn)
gx=leaf(16,128,28,28); gw=leaf(128,4,3,3)
add("grouped_conv_g32", lambda: F.conv2d(gx,gw,padding=1,groups=32).sum().backward())
wx=leaf(16,64,1024); wk=leaf(128,64,2); wr=leaf(64,64,1)
def wavenet():
    h=F.conv1d(wx,wk,padding=4,dilation=4)[:,:,:1024]
    g=torch.tanh(h[:,:64])*torch.sigmoid(h[:,64:128])
    (F.conv1d(g,wr)+wx).sum().backward()
add("wavenet_gated", wavenet)
bh=leaf(1024,256); bw=leaf(16000,256); bt=torch.randint(0,16000,(1024,))
add("big_vocab_ce", lambda: F.cross_entropy(F.linear(bh,bw),bt).backward())
px=leaf(8,64,32,32); pk=leaf(256,64,3,3)
def pshuf():
    h=F.conv2d(px,pk,padding=1).reshape(8,64,2,2,32,32).permute(0,1,4,2,5,3)
    h.reshape(8,64,64,64).pow(2.0).mean().backward()
add("pixel_shuffle", pshuf)
params=[]
for l in range(12):
    for s in [(768,256),(768,),(256,256),(256,),(1024,256),(1024,),(256,1024),(256,),(256,),(256,),(256,),(256,)]:
        params.append(leaf(*s))
sum(p.pow(2.0).sum() for p in params).backward()
opt=torch.optim.AdamW(params)
def adamw():
    torch.nn.utils.clip_grad_norm_(params,1.0)
    opt.step()
add("adamw_clip_step", adamw)
tokw=leaf(32000,256); posw=leaf(1024,256); lnw=leaf(256); lnb=leaf(256)
tokidx=torch.randint(0,32000,(16,256))
def embin():
    h=F.embedding(tokidx,tokw)+posw[:256]
    F.layer_norm(F.dropout(h,0.1),(256,),lnw,lnb).pow(2.0).mean().backward()
add("gpt_embed_input", embin)
lx=leaf(64,200,128); llen=torch.randint(1,201,(64,))
def lenmask():
    mask=(torch.arange(200).unsqueeze(0)<llen.unsqueeze(1)).unsqueeze(2).float()
    ((lx*mask).sum(1)/llen.unsqueeze(1).float()).sum().backward()
add("length_mask_mean", lenmask)
rq=leaf(512,256); rk=leaf(8192,256)
def retr():
    q=rq/rq.norm(2,1,True); k=rk/rk.norm(2,1,True)
    torch.topk(q@k.t(),10).values.sum().backward()
add("retrieval_topk", retr)
kc=torch.randn(8,8,128,64); vc=torch.randn(8,8,128,64); qd=torch.randn(8,8,1,64); knew=torch.randn(8,8,1,64)
def kvdec():
    with torch.no_grad():
        k=kc; v=vc
        for i in range(32):
            k=torch.cat([k,knew],2); v=torch.cat([v,knew],2)
            o=torch.softmax((qd@k.transpose(-2,-1))*0.125,-1)@v
        return o
add("kv_cache_decode", kvdec)
dl=leaf(8,21,64,64); dt=torch.randint(0,21,(8,64,64))
def dice():
    p=torch.softmax(dl,1)
    t=F.one_hot(dt,21).permute(0,3,1,2).float()
    inter=(p*t).sum((0,2,3)); card=(p+t).sum((0,2,3))
    (1.0-(inter*2.0+1.0)/(card+1.0)).mean().backward()
add("dice_loss", dice)
ix=torch.randn(16,64,32,32); ik=torch.randn(64,64,3,3)*0.05; irm=torch.zeros(64); irv=torch.ones(64)
iw=torch.ones(64); ib=torch.zeros(64)
def cnninf():
    with torch.no_grad():
        h=ix
        for i in range(3):
            h=torch.relu(F.batch_norm(F.conv2d(h,ik,padding=1),irm,irv,iw,ib,training=False))
        return h
add("cnn_inference", cnninf)
run_patterns(cases)
