/* cmdline_cases.c: prints command lines rewritten by cmdline.c, one JSON case a line, with what each
 * must mean to its family's real parser; check_cmdline.py parses and checks them. */
#include <stdio.h>
#include <string.h>

#include "cmdline.h"

#define ARGC(a) (sizeof(a) / sizeof((a)[0]))

static void print_case(const char *name, const char *family, char *const *c, size_t n,
                       const char *want)
{
    printf("{\"name\": \"%s\", \"family\": \"%s\", \"argv\": [", name, family);
    for (size_t i = 0; i < n; i++) {
        printf("%s\"", i ? ", " : "");
        for (const char *p = c[i]; *p; p++) {
            if (*p == '"' || *p == '\\')
                putchar('\\');
            putchar(*p);
        }
        putchar('"');
    }
    printf("], \"want\": {%s}}\n", want);
}

/* The batch (and, when given, accumulation) rewritten as advice does. */
static void with_batch(const char *name, const char *family, const char *const *argv, size_t argc,
                       long long batch, long long accum, const char *accum_name, const char *want)
{
    struct cmdline_flag b, a;
    cmdline_find(argv, argc, CMDLINE_BATCH, &b);
    cmdline_find(argv, argc, CMDLINE_ACCUM, &a);
    struct cmdline_edit e[2] = { { &b, cmdline_append_name(argv, argc, CMDLINE_BATCH), batch },
                                 { &a, accum_name, accum } };
    size_t n;
    char **c = cmdline_with_edits(argv, argc, e, accum ? 2 : 1, &n);
    print_case(name, family, c, n, want);
    cmdline_free(c, n);
}

static void with_launcher(const char *name, const char *family, const char *const *argv,
                          size_t argc, long long nproc, long long batch, const char *want)
{
    size_t n;
    char **c = cmdline_with_launcher(argv, argc, nproc, &n);
    if (!c) {
        printf("{\"name\": \"%s\", \"family\": \"%s\", \"argv\": [\"no-command\"], \"want\": {}}\n",
               name, family);
        return;
    }
    if (batch) {
        struct cmdline_flag b;
        cmdline_find((const char *const *)c, n, CMDLINE_BATCH, &b);
        long long v = cmdline_batch_for_world((const char *const *)c, n, batch, nproc);
        char **d = cmdline_with_value((const char *const *)c, n, &b, v);
        cmdline_free(c, n);
        c = d;
    }
    print_case(name, family, c, n, want);
    cmdline_free(c, n);
}

int main(void)
{
    const char *v9[] = { "python",    "train_dual.py",
                         "--workers", "8",
                         "--device",  "0",
                         "--batch",   "64",
                         "--data",    "data.yaml",
                         "--img",     "640",
                         "--cfg",     "models/detect/yolov9-s.yaml",
                         "--epochs",  "20" };
    with_batch("yolov9 batch", "yolov9", v9, ARGC(v9), 24, 0, NULL,
               "\"batch\": 24, \"accumulate\": 3, \"imgsz\": 640");
    const char *v9auto[] = {
        "python3", "train_dual.py", "--batch", "-1", "--cfg", "yolov9-c.yaml"
    };
    with_batch("yolov9 autobatch", "yolov9", v9auto, ARGC(v9auto), 16, 0, NULL,
               "\"batch\": 16, \"autobatch\": false");
    const char *v9eq[] = {
        "python3", "-u", "train_dual.py", "--batch-size=64", "--img-size", "640"
    };
    with_batch("yolov9 --batch-size=", "yolov9", v9eq, ARGC(v9eq), 32, 0, NULL,
               "\"batch\": 32, \"accumulate\": 2");
    with_launcher("yolov9 onto 4 GPUs", "yolov9", v9eq, ARGC(v9eq), 4, 0,
                  "\"launcher\": \"torchrun\", \"world_size\": 4, \"batch\": 64");
    with_launcher("yolov9 onto 8 GPUs, batch rounded", "yolov9", v9eq, ARGC(v9eq), 8, 52,
                  "\"launcher\": \"torchrun\", \"world_size\": 8, \"batch\": 48");
    const char *v9tr[] = { "torchrun", "--nproc-per-node=2", "--master_port",
                           "29500",    "train_dual.py",      "--batch",
                           "64" };
    with_launcher("yolov9 torchrun recount", "yolov9", v9tr, ARGC(v9tr), 4, 0,
                  "\"world_size\": 4, \"batch\": 64");
    with_batch("yolov9 under torchrun", "yolov9", v9tr, ARGC(v9tr), 32, 0, NULL,
               "\"world_size\": 2, \"batch\": 32");

    const char *ul[] = { "python3",         "/usr/local/bin/yolo", "train",     "model=yolov8n.pt",
                         "data=coco8.yaml", "--batch=64",          "imgsz=640", "amp=False" };
    with_batch("ultralytics installed, --batch=", "ultralytics", ul, ARGC(ul), 32, 0, NULL,
               "\"batch\": 32, \"accumulate\": 2, \"amp\": false, \"imgsz\": 640");
    const char *ulf[] = { "yolo", "detect", "train", "model=yolov8n.pt", "batch=0.7", "nbs=128" };
    with_batch("ultralytics fraction", "ultralytics", ulf, ARGC(ulf), 16, 0, NULL,
               "\"batch\": 16, \"autobatch\": false, \"accumulate\": 8, \"nbs\": 128");
    const char *ulm[] = { "yolo", "train", "batch=-1" };
    with_batch("ultralytics -1", "ultralytics", ulm, ARGC(ulm), 8, 0, NULL,
               "\"batch\": 8, \"autobatch\": false");
    const char *uln[] = { "yolo", "train", "model=yolov8s.pt" };
    with_batch("ultralytics no batch", "ultralytics", uln, ARGC(uln), 8, 0, NULL,
               "\"batch\": 8, \"accumulate\": 8");

    const char *hf[] = { "python3",
                         "run_clm.py",
                         "--model_name_or_path",
                         "gpt2",
                         "--per-device-train-batch-size",
                         "16",
                         "--gradient-accumulation-steps",
                         "2",
                         "--gradient-checkpointing",
                         "--fp16",
                         "true",
                         "--output_dir",
                         "out" };
    with_batch("hf dashed", "hf", hf, ARGC(hf), 8, 4, "--gradient_accumulation_steps",
               "\"batch\": 8, \"accumulate\": 4, \"gradient_checkpointing\": true, \"fp16\": true");
    const char *hf2[] = {
        "torchrun", "--nproc_per_node", "2",  "run_clm.py", "--per_device_train_batch_size", "16",
        "--bf16",   "--output_dir",     "out"
    };
    with_batch("hf accumulation added", "hf", hf2, ARGC(hf2), 8, 2, "--gradient_accumulation_steps",
               "\"batch\": 8, \"accumulate\": 2, \"bf16\": true, \"world_size\": 2");
    with_launcher("hf torchrun recount", "hf", hf2, ARGC(hf2), 8, 0,
                  "\"world_size\": 8, \"batch\": 16");
    const char *hfa[] = { "accelerate",
                          "launch",
                          "--num-processes",
                          "2",
                          "--gradient_accumulation_steps",
                          "4",
                          "run_clm.py",
                          "--per_device_train_batch_size",
                          "16",
                          "--output_dir",
                          "out" };
    with_batch("hf under accelerate", "hf", hfa, ARGC(hfa), 8, 2, "--gradient_accumulation_steps",
               "\"batch\": 8, \"accumulate\": 2, \"world_size\": 2, \"launcher\": \"accelerate\"");
    with_launcher("hf accelerate recount", "hf", hfa, ARGC(hfa), 4, 0, "\"world_size\": 4");

    const char *gen[] = { "python3", "-u",    "examples/train_torch.py",
                          "--batch", "16",    "--accumulate",
                          "2",       "--cfg", "s" };
    with_batch("generic --accumulate", "generic", gen, ARGC(gen), 8, 4, "--accumulate",
               "\"batch\": 8, \"accumulate\": 4");
    with_launcher("generic onto 2 GPUs", "generic", gen, ARGC(gen), 2, 0,
                  "\"launcher\": \"torchrun\", \"world_size\": 2, \"batch\": 16");
    const char *gen2[] = { "python3", "examples/train_torch.py", "--img", "640" };
    with_batch("generic accumulation added", "generic", gen2, ARGC(gen2), 8, 2, "--accumulate",
               "\"batch\": 8, \"accumulate\": 2");
    const char *ds[] = { "deepspeed",     "--num_gpus", "2",
                         "--master_port", "29501",      "examples/train_torch.py",
                         "--batch",       "16" };
    with_launcher("generic deepspeed recount", "generic", ds, ARGC(ds), 4, 0,
                  "\"launcher\": \"deepspeed\", \"world_size\": 4, \"batch\": 16");
    with_batch("generic under deepspeed", "generic", ds, ARGC(ds), 8, 0, NULL,
               "\"batch\": 8, \"world_size\": 2");
    return 0;
}
