# PyTorch twin of unet.cpp; tools/patterns.sh runs both.
import torch, time, sys
import torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(1); torch.manual_seed(0)
bf16 = len(sys.argv) > 1
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1=nn.Conv2d(3,32,3,padding=1); s.c2=nn.Conv2d(32,64,3,stride=2,padding=1); s.c3=nn.Conv2d(64,32,3,padding=1); s.c4=nn.Conv2d(32,3,3,padding=1)
        s.g1=nn.GroupNorm(8,32); s.g2=nn.GroupNorm(8,64); s.g3=nn.GroupNorm(8,32)
    def forward(s,x):
        h1=F.silu(s.g1(s.c1(x))); h2=F.silu(s.g2(s.c2(h1)))
        u=F.interpolate(h2,scale_factor=2.0,mode="bilinear"); h3=F.silu(s.g3(s.c3(u)))+h1
        return s.c4(h3)
net=Net(); opt=torch.optim.AdamW(net.parameters(), lr=2e-3)
clean=torch.rand(16,3,32,32); best=1e30
for it in range(30):
    t=time.perf_counter()
    noisy=clean+torch.randn(clean.shape)*0.3
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss=F.mse_loss(net(noisy), clean)
    loss.backward(); opt.step()
    ms=(time.perf_counter()-t)*1e3
    if it>=5: best=min(best,ms)
    if it==0: first=loss.item()
    last=loss.item()
print("pytorch %s: step %.2f ms (best of 25), loss %.4f -> %.4f"%("bf16" if bf16 else "fp32", best, first, last))
