"""A PyTorch job on the CPU that places no markers, with device memory allocated on the
simulated GPU through ctypes between its switches of mode: the companion must mark exactly

    epoch 0 train, epoch 0 val, epoch 1 train, epoch 1 val, epoch 2 train, epoch 2 val, epoch 3 train

and change nothing the job sees. The switches are those of real jobs: an EMA copy put in eval
mode at set-up, train() at every step (Hugging Face's Trainer), eval() on the model, eval() on the
EMA copy that is already in eval mode (YOLOv9's validation), train(False), and a model whose own
train() freezes its batch norm with eval() after super().train().

--job-marks: the job looks vramwatch_mark up and marks its own phases; the companion then adds
nothing.
--job-steps: the job looks vramwatch_step up and says where its steps end, once per epoch; the
companion then calls it no more and takes back its promise of a call after every step."""
import copy
import ctypes
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import facts  # noqa: E402

MiB = 1 << 20
job_marks = "--job-marks" in sys.argv[1:]
job_steps = "--job-steps" in sys.argv[1:]
facts.record({"step_hook": hasattr(sys.modules.get("torch.optim.optimizer"),
                                   "register_optimizer_step_post_hook")})

# The simulated runtime by path (the test gives it): with PyTorch's CUDA wheel imported, the
# wheel's own libcudart.so.13 is already loaded under that soname and would answer instead.
rt = ctypes.CDLL(os.environ.get("VW_TEST_CUDART", "libcudart.so.13"))
held = []


def alloc(mib):
    p = ctypes.c_void_p()
    rc = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(mib * MiB))
    assert rc == 0, "cudaMalloc: %d" % rc
    held.append(p)


def free_all():
    while held:
        assert rt.cudaFree(held.pop()) == 0


mark = lambda label: None  # noqa: E731
if job_marks:
    fn = ctypes.CDLL(None).vramwatch_mark
    fn.argtypes = [ctypes.c_char_p]
    mark = lambda label: fn(label.encode())  # noqa: E731
end_step = lambda: None  # noqa: E731
if job_steps:
    end_step = ctypes.CDLL(None).vramwatch_step


class FrozenNorm(nn.Module):
    """Fine-tuning with frozen batch norm: its own train() calls eval() on the norm layers."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))

    def train(self, mode=True):
        super().train(mode)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.eval()
        return self


def check(module, training):
    assert all(m.training == training for m in module.modules()), "modes changed"


model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Sequential(nn.ReLU(), nn.Linear(16, 4)))
ema = copy.deepcopy(model).eval()  # set-up, before any training: no phase
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
alloc(8)  # weights

mark("setup")
for epoch in range(3):
    mark("epoch %d train" % epoch)
    assert model.train() is model
    check(model, True)
    for step in range(3):
        model.train()  # at every step: not a switch
        alloc(4)
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        free_all()
    end_step()
    mark("epoch %d val" % epoch)
    if epoch == 0:
        assert model.eval() is model
        check(model, False)
    elif epoch == 1:
        ema.eval()  # YOLOv9: the EMA copy, already in eval mode
        model.eval()
    else:
        model.train(False)
        check(model, False)
    with torch.no_grad():
        model(x)
    alloc(6)
    free_all()

# A mode that is not a bool is the job's error, passed on unchanged; it switches nothing.
try:
    model.train("yes")
except ValueError as e:
    assert "boolean" in str(e), str(e)
else:
    raise AssertionError("train('yes') did not raise")

frozen = FrozenNorm()
mark("epoch 3 train")
frozen.train()  # one switch, to training, whatever it does inside
assert frozen.training and not frozen.body[1].training
alloc(2)

# What inspects the patched method still sees the original.
import inspect  # noqa: E402

assert list(inspect.signature(nn.Module.train).parameters) == ["self", "mode"]
assert nn.Module.train.__name__ == "train"
torch.jit.script(nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
torch.fx.symbolic_trace(model)
