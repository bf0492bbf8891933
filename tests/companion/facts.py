"""What the test scripts tell their driver about the process they ran in, written at exit (after
everything the job did) to the JSON file named by VW_TEST_FACTS."""
import atexit
import json
import os
import sys


def record(extra=None):
    path = os.environ.get("VW_TEST_FACTS")
    if not path:
        return

    def write():
        torch = sys.modules.get("torch")
        train = torch.nn.Module.__dict__["train"] if torch is not None else None
        site = sys.modules.get("sitecustomize")
        facts = {
            "torch_imported": torch is not None,
            # sitecustomize's import hook waits for torch; the companion proper is imported
            # only with torch
            "companion_loaded": "vramwatch_companion" in sys.modules,
            "finder_waiting": any(type(f).__name__ == "TorchFinder" for f in sys.meta_path),
            "train_wrapped": bool(getattr(train, "vramwatch_companion_wrapped", False)),
            "sitecustomize_file": getattr(site, "__file__", None),
            "chained": os.environ.get("VW_TEST_CHAINED"),
            "sys_path": sys.path,
        }
        facts.update(extra or {})
        with open(path, "w") as f:
            json.dump(facts, f)

    atexit.register(write)
