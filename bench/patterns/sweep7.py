# PyTorch twin of sweep7.cpp (same cases, names and sizes); tools/patterns.sh runs both.
import torch
import torch.nn.functional as F
from pattern_common import leaf, run_patterns
cases=[]
def add(n,f): cases.append((n,f))
seg=leaf(8,21,64,64); segt=torch.randint(0,21,(8,64,64))
add("seg_ce_4d", lambda: F.cross_entropy(seg,segt).backward())
seg2=leaf(4,150,32,32); segt2=torch.randint(0,150,(4,32,32))
add("seg_ce_150_smooth", lambda: F.cross_entropy(seg2,segt2,label_smoothing=0.1).backward())
seg3=leaf(8,21,64,64)
add("seg_ce_bf16", lambda: F.cross_entropy(seg3.to(torch.bfloat16),segt).backward())
nodes=leaf(4096,64); ew=leaf(32768,1)
esrc=torch.randint(0,4096,(32768,)); edst=torch.randint(0,4096,(32768,))
edst2=edst.unsqueeze(1).expand(32768,64).contiguous()
def gnn():
    msg=torch.index_select(nodes,0,esrc)*ew
    torch.zeros(4096,64).scatter_add(0,edst2,msg).sum().backward()
add("gnn_scatter_add", gnn)
sx=leaf(2048,256); W1=leaf(256,512); W3=leaf(256,512); W2=leaf(512,256)
add("swiglu", lambda: ((F.silu(sx@W1)*(sx@W3))@W2).sum().backward())
ea=leaf(512,256); eb=leaf(512,256); lab=torch.arange(512)
def clip():
    a=ea/ea.norm(2,1,True); b=eb/eb.norm(2,1,True)
    l=(a@b.t())/0.07
    ((F.cross_entropy(l,lab)+F.cross_entropy(l.t(),lab))/2).backward()
add("clip_contrastive", clip)
fl=leaf(262144); ft=(torch.rand(262144)>0.7).float()
def focal():
    p=torch.sigmoid(fl)
    ce=F.binary_cross_entropy_with_logits(fl,ft,reduction='none')
    pt=p*ft+(1-p)*(1-ft)
    (torch.pow(1-pt,2.0)*ce).mean().backward()
add("focal_loss", focal)
img=leaf(256,3,32,32); perm=torch.randperm(256)
add("mixup", lambda: (0.7*img+0.3*torch.index_select(img,0,perm)).sum().backward())
gx=leaf(256,512); D1=leaf(512,512); D2=leaf(512,1)
def wgan():
    d=F.leaky_relu(gx@D1,0.2)@D2
    g=torch.autograd.grad([d.sum()],[gx],create_graph=True)[0]
    torch.pow(g.norm(2,1)-1,2.0).mean().backward()
add("wgan_gp", wgan)
tc=leaf(32,128,256); tk=leaf(128,128,5)
add("conv1d_temporal", lambda: F.conv1d(tc,tk,padding=2).sum().backward())
pm=leaf(32,256,512); pmask=(torch.rand(32,256,1)>0.2).float()
add("masked_mean_pool", lambda: ((pm*pmask).sum(1)/pmask.sum(1)).sum().backward())
gl=leaf(4096,64); gu=torch.rand(4096,64)*0.998+0.001
def gumbel():
    g=-torch.log(-torch.log(gu))
    torch.softmax((gl+g)/0.5,-1).pow(2.0).sum().backward()
add("gumbel_softmax", gumbel)
el=leaf(4096,256)
def ent():
    p=torch.softmax(el,-1)
    (-(p*torch.log_softmax(el,-1)).sum(-1)).mean().backward()
add("entropy_reg", ent)
add("standardize_dim0", lambda: ((el-el.mean(0,True))/el.std(0,unbiased=True,keepdim=True)).pow(2.0).sum().backward())
big=leaf(1048576)
add("elu_by_where", lambda: torch.where(big>0,big,torch.exp(big)-1).sum().backward())
ha=leaf(1024,1024); hb=torch.randn(1024,1024)
def huber():
    d=ha-hb; ad=d.abs()
    torch.where(ad<1,0.5*d*d,ad-0.5).mean().backward()
add("huber_by_hand", huber)
ta=leaf(4096,128); tp=leaf(4096,128); tn=leaf(4096,128)
add("triplet_by_hand", lambda: torch.relu((ta-tp).norm(2,1)-(ta-tn).norm(2,1)+1).mean().backward())
wv=leaf(512,512); wg=leaf(512,1); wx=leaf(256,512)
add("weight_norm", lambda: (wx@(wg*wv/wv.norm(2,1,True)).t()).sum().backward())
fm=leaf(16,64,32,32)
add("layer_norm_hw", lambda: F.layer_norm(fm,(32,32)).pow(2.0).sum().backward())
hw=leaf(10,64); hbias=leaf(10)
add("avgpool_head", lambda: F.cross_entropy(F.linear(F.adaptive_avg_pool2d(fm,(1,1)).flatten(1),hw,hbias),torch.randint(0,10,(16,))).backward())
bq=leaf(8,8,256,64); bw=leaf(64,64)
add("bcast_matmul", lambda: (bq@bw).sum().backward())
add("nearest_up2x", lambda: F.interpolate(fm,scale_factor=2.0,mode='nearest').sum().backward())
add("softmax_channels", lambda: torch.softmax(fm,1).pow(2.0).sum().backward())
px=leaf(1024,1024)
add("poly3", lambda: (px*px*px-2.0*px*px+px).sum().backward())
sb=torch.rand(1024,64).requires_grad_()
add("stick_breaking", lambda: (sb*torch.cumprod(1.0-sb,-1)).sum().backward())
med=torch.randn(4096,64)
def medf():
    with torch.no_grad(): return torch.sort(med,-1).values.select(1,32)
add("sort_median", medf)
add("std_last", lambda: el.std(-1,unbiased=True).sum().backward())
ls=leaf(4096,1000)
add("temp_log_softmax", lambda: (-torch.log_softmax(ls/2.0,-1).select(1,7)).mean().backward())
q8=torch.randn(1024,1024)
def quant():
    with torch.no_grad():
        s=q8.abs().amax(1,True)/127.0
        return torch.clamp(q8/s+128.0,0.0,255.0).to(torch.uint8)
add("absmax_quant", quant)
ob=leaf(4096,256); ow=leaf(256,256); ob2=leaf(256)
add("addmm_relu_3d", lambda: torch.relu(F.linear(ob.view(16,256,256),ow,ob2)).sum().backward())
run_patterns(cases)
