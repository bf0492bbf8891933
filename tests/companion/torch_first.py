import torch  # noqa: I001  the first import after start-up: nothing else may come before it

"""A job whose first import is torch (nothing imported before it that Python had not already
loaded at start-up): the import hook must still see it. The finder that takes an interpreter's
missing sitecustomize out again runs at that same import, and once made the next finder on
sys.meta_path, the companion's, be skipped."""
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import facts  # noqa: E402

facts.record()
model = torch.nn.Linear(2, 2)
model.train()
model.eval()
