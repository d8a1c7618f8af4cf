# PyTorch twin of seg_gan.cpp; tools/patterns.sh runs both.
import torch, time, sys
import torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(int(__import__("os").environ.get("OMP_NUM_THREADS", "1")))
torch.manual_seed(0)
which = sys.argv[1]; bf16 = len(sys.argv) > 2
class Seg(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 32, 3, padding=1); s.c2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        s.c3 = nn.Conv2d(64, 64, 3, padding=1); s.head = nn.Conv2d(64, 21, 1)
        s.b1 = nn.BatchNorm2d(32); s.b2 = nn.BatchNorm2d(64); s.b3 = nn.BatchNorm2d(64)
    def forward(s, x):
        h = F.relu(s.b1(s.c1(x))); h = F.relu(s.b2(s.c2(h))); h = F.relu(s.b3(s.c3(h)))
        return s.head(F.interpolate(h, scale_factor=2.0, mode="nearest"))
class Critic(nn.Module):
    def __init__(s):
        super().__init__(); s.l1 = nn.Linear(784, 512); s.l2 = nn.Linear(512, 256); s.l3 = nn.Linear(256, 1)
    def forward(s, x): return s.l3(F.leaky_relu(s.l2(F.leaky_relu(s.l1(x), 0.2)), 0.2))
best = 1e30; first = last = 0
def ctx(): return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)
if which == "seg":
    net = Seg(); opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.randn(8, 3, 64, 64); m = x.mean(1)
    t = (m > 0).long() + (m > 0.7).long() * 5; t = torch.where(m < -1.2, torch.full_like(t, 255), t)
    def step():
        opt.zero_grad()
        with ctx(): loss = F.cross_entropy(net(x), t, ignore_index=255)
        loss.backward(); opt.step(); return loss
else:
    D = Critic(); opt = torch.optim.Adam(D.parameters(), lr=1e-4)
    real = torch.rand(256, 784); fake = torch.rand(256, 784) * 0.5
    def step():
        opt.zero_grad()
        with ctx():
            eps = torch.rand(256, 1)
            xi = (eps * real + (1 - eps) * fake).detach().requires_grad_()
            d = D(xi)
            g = torch.autograd.grad([d.sum()], [xi], retain_graph=True, create_graph=True)[0]
            gp = (g.float().norm(2, 1) - 1).pow(2.0).mean()
            loss = D(fake).mean() - D(real).mean() + 10 * gp
        loss.backward(); opt.step(); return loss
for it in range(30):
    t0 = time.perf_counter(); loss = step(); ms = (time.perf_counter() - t0) * 1e3
    if it >= 5: best = min(best, ms)
    if it == 0: first = loss.item()
    last = loss.item()
print("pytorch %s %s: step %.2f ms (best of 25), loss %.4f -> %.4f" % (which, "bf16" if bf16 else "fp32", best, first, last))
