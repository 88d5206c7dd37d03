#!/usr/bin/python3
"""Reference for tests/nn/models/test_resnet.c: two tiny ResNets in PyTorch (float64).

torchvision is not installed here, so its BasicBlock / Bottleneck / ResNet are re-typed below from
torchvision/models/resnet.py (v1.5: the bottleneck's stride on conv2; downsample = 1x1 conv + BN),
with the stem width a parameter (torchvision fixes 64) so the file stays small:
  r18: basic blocks, blocks per stage [2, 1, 1, 1], width 4, 5 classes, input [2, 3, 40, 36]
  r50: bottlenecks,  blocks per stage [1, 2, 1, 1], width 4, 5 classes, input [2, 3, 33, 35]
Batch-norm weights, biases and running statistics are random (not 1/0) so eval mode is a real test.
Stored as F32 with prefix "r18." / "r50.": every parameter and buffer under torchvision's names
(num_batches_tracked left out), the input "x", a random weight "r", the eval-mode logits "eval",
the train-mode logits "train", the running statistics after that train forward "after.<name>", and
the gradients of sum(train * r) "grad.<name>" for the parameters of the stem, the first block,
layer2's downsample and fc.
Run: /usr/bin/python3 tests/ref/make_resnet_ref.py  (writes tests/ref/resnet_tiny.safetensors)
"""
import json
import os
import struct

import torch
import torch.nn as nn

dt = torch.float64


def conv3x3(i, o, stride=1):
    return nn.Conv2d(i, o, 3, stride=stride, padding=1, bias=False)


def conv1x1(i, o, stride=1):
    return nn.Conv2d(i, o, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, width, num_classes):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def case(prefix, block, layers, shape, out):
    m = ResNet(block, layers, 4, 5).to(dt)
    with torch.no_grad():
        for name, mod in m.named_modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0, 0.1)
                mod.running_mean.normal_(0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn(*shape, dtype=dt)
    m.eval()
    y_eval = m(x)
    R = torch.randn_like(y_eval)
    state = {k: v.clone() for k, v in m.state_dict().items() if not k.endswith("num_batches_tracked")}
    m.train()
    y_train = m(x)
    (y_train * R).sum().backward()
    for k, v in state.items():
        out[prefix + k] = v
    for k, v in m.state_dict().items():
        if "running_" in k:
            out[prefix + "after." + k] = v
    for k, p in m.named_parameters():  # the stem, the first block, a downsample, fc: enough to
        if k.startswith(("conv1.", "bn1.", "layer1.0.", "layer2.0.downsample.", "fc.")):  # stay small
            out[prefix + "grad." + k] = p.grad
    out[prefix + "x"], out[prefix + "r"] = x, R
    out[prefix + "eval"], out[prefix + "train"] = y_eval, y_train


def main():
    torch.manual_seed(2025)
    out = {}
    case("r18.", BasicBlock, [2, 1, 1, 1], (2, 3, 40, 36), out)
    case("r50.", Bottleneck, [1, 2, 1, 1], (2, 3, 33, 35), out)
    header, blobs, off = {}, [], 0
    for name in sorted(out):
        a = out[name].detach().numpy().astype("<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    header["__metadata__"] = {"source": "tests/ref/make_resnet_ref.py", "torch": torch.__version__}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resnet_tiny.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
