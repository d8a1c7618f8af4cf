"""The CIFAR ResNet of He et al. 2016 in PyTorch, with the parameter names of
mantissa::nn::CifarResNet (nn/resnet.h): 3 stages of basic blocks with 16/32/64 channels,
1x1 conv + BN projection shortcuts where the shape changes, global average pooling.
Used by tools/gen_reference_resnet.py and tools/bench_resnet_torch.py."""
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + (self.shortcut(x) if self.shortcut is not None else x))


class CifarResNet(nn.Module):
    def __init__(self, depth, num_classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = nn.Sequential(*[BasicBlock(16, 16, 1) for _ in range(n)])
        self.layer2 = nn.Sequential(*[BasicBlock(16 if i == 0 else 32, 32, 2 if i == 0 else 1) for i in range(n)])
        self.layer3 = nn.Sequential(*[BasicBlock(32 if i == 0 else 64, 64, 2 if i == 0 else 1) for i in range(n)])
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.layer3(self.layer2(self.layer1(h)))
        return self.fc(h.mean((2, 3)))
