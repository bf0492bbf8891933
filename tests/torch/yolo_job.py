"""Ultralytics' training as the tests and benchmarks run it on the simulated card: offline, over
the dataset yolo_data.py writes, and judged by one rule. Imported by tests/torch/
run_torch_tests.py, tests/advise/accuracy.py and tests/bench/yolo_tables.py."""
import os


def offline_env(folder):
    """The variables that let Ultralytics (and Hugging Face) run with no network and write nothing
    into the user's home: Ultralytics then skips the downloads it would make (its font, the AMP
    check's weights) and says so; its settings and matplotlib's cache go into folder."""
    env = {"YOLO_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "YOLO_CONFIG_DIR": os.path.join(folder, "yolo-config"),
           "MPLCONFIGDIR": os.path.join(folder, "mpl")}
    for k in ("YOLO_CONFIG_DIR", "MPLCONFIGDIR"):
        os.makedirs(env[k], exist_ok=True)
    return env


def train_args(data, batch, project, name=None, model="yolov9c.yaml", imgsz=640, extra=()):
    """`yolo train`'s key=value arguments: one epoch, validation included, no plots."""
    return ([f"model={model}", f"data={data}", f"imgsz={imgsz}", "epochs=1", "workers=2", "device=0",
             f"project={project}"] + ([f"name={name}"] if name else [])
            + ["exist_ok=True", "plots=False", f"batch={batch}"] + list(extra))


def completed(returncode, output):
    """Whether a run completed: it exited 0 and never ran out of memory once training started.
    Ultralytics catches an out-of-memory in its first epoch, halves the batch, trains on and
    exits 0, so the exit status alone would call a batch that failed a fit; AutoBatch's profiling
    runs out of memory on purpose at its largest probe (batch 64 on a 24 GiB card) and says so,
    before training starts. A job that prints no "Starting training" is judged on all it said."""
    training = output.split("Starting training", 1)[-1]
    return returncode == 0 and "out of memory" not in training.lower()
