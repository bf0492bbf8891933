/* test_cmdline.c: finding and rewriting batch and image flags on real-world command lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#include "cmdline.h"

static int failures;

#define ARGC(a) (sizeof(a) / sizeof((a)[0]))

/* Finds the flag, rewrites it to value and compares the whole rewritten line with want. */
static void expect(const char *const *argv, size_t argc, enum cmdline_kind kind, const char *name,
                   long long value, long long new_value, const char *want)
{
    struct cmdline_flag f;
    cmdline_find(argv, argc, kind, &f);
    if (!name) {
        EXPECT(!f.found);
        return;
    }
    EXPECT(f.found);
    if (!f.found)
        return;
    if (strcmp(f.name, name) != 0) {
        fprintf(stderr, "flag %s, expected %s\n", f.name, name);
        failures++;
    }
    EXPECT(f.value == value);
    char **c = cmdline_with_value(argv, argc, &f, new_value);
    char line[512] = "";
    for (size_t i = 0; i < argc; i++) {
        if (i)
            strcat(line, " ");
        strncat(line, c[i], sizeof line - strlen(line) - 1);
    }
    if (strcmp(line, want) != 0) {
        fprintf(stderr, "rewritten: %s\nexpected:  %s\n", line, want);
        failures++;
    }
    cmdline_free(c, argc);
}

/* argv joined by single spaces, for comparing a whole command line. */
static void join(char *const *c, size_t n, char *line, size_t size)
{
    line[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            strncat(line, " ", size - strlen(line) - 1);
        strncat(line, c[i], size - strlen(line) - 1);
    }
}

/* cmdline_with_launcher's result against want (NULL: no such command). */
static void expect_launch(const char *const *argv, size_t argc, long long nproc, const char *want)
{
    size_t n = 99;
    char **c = cmdline_with_launcher(argv, argc, nproc, &n);
    if (!want) {
        EXPECT(c == NULL && n == 0);
        cmdline_free(c, n);
        return;
    }
    EXPECT(c != NULL);
    if (!c)
        return;
    EXPECT(c[n] == NULL);
    char line[512];
    join(c, n, line, sizeof line);
    if (strcmp(line, want) != 0) {
        fprintf(stderr, "launched: %s\nexpected: %s\n", line, want);
        failures++;
    }
    cmdline_free(c, n);
}

/* Each item of the brief on launchers, AutoBatch, families and booleans. */
static void test_families_and_launchers(void)
{
    /* AutoBatch: the flag is there, asks for auto, and is replaced with a number in place */
    const char *v9auto[] = { "python", "train_dual.py", "--batch",
                             "-1",     "--cfg",         "models/detect/yolov9-s.yaml" };
    struct cmdline_flag f;
    cmdline_find(v9auto, ARGC(v9auto), CMDLINE_BATCH, &f);
    EXPECT(!f.found && f.autobatch && f.index == 3 && strcmp(f.name, "--batch") == 0 &&
          f.fraction == 0);
    char **c = cmdline_with_value(v9auto, ARGC(v9auto), &f, 16);
    char line[512];
    join(c, ARGC(v9auto), line, sizeof line);
    EXPECT(strcmp(line, "python train_dual.py --batch 16 --cfg models/detect/yolov9-s.yaml") == 0);
    cmdline_free(c, ARGC(v9auto));
    const char *frac[] = { "yolo", "train", "model=yolov8n.pt", "batch=0.7" };
    cmdline_find(frac, ARGC(frac), CMDLINE_BATCH, &f);
    EXPECT(!f.found && f.autobatch && f.fraction > 0.69 && f.fraction < 0.71 &&
          strcmp(f.name, "batch=") == 0);
    expect(frac, ARGC(frac), CMDLINE_BATCH, NULL, 0, 0, NULL);
    /* a generic script's -1 is its own business, not AutoBatch */
    const char *gen_neg[] = { "python3", "main.py", "--batch-size", "-1" };
    cmdline_find(gen_neg, ARGC(gen_neg), CMDLINE_BATCH, &f);
    EXPECT(!f.found && !f.autobatch);
    /* AutoBatch at another run's batch is still the same job */
    const char *v9b16[] = { "python", "train_dual.py", "--batch",
                            "16",     "--cfg",         "models/detect/yolov9-s.yaml" };
    EXPECT(cmdline_same_job(v9auto, ARGC(v9auto), v9b16, ARGC(v9b16)));

    /* Ultralytics installed: python3 /usr/local/bin/yolo; dashed key=value; its own keys only */
    const char *uinst[] = { "python3",    "/usr/local/bin/yolo", "train",   "model=yolov8n.pt",
                            "--batch=64", "imgsz=640",           "nbs=128", "amp=False" };
    EXPECT(cmdline_family(uinst, ARGC(uinst)) == CMDLINE_ULTRALYTICS);
    expect(uinst, ARGC(uinst), CMDLINE_BATCH, "--batch=", 64, 32,
           "python3 /usr/local/bin/yolo train model=yolov8n.pt --batch=32 imgsz=640 nbs=128 amp=False");
    expect(uinst, ARGC(uinst), CMDLINE_IMAGE, "imgsz=", 640, 512,
           "python3 /usr/local/bin/yolo train model=yolov8n.pt --batch=64 imgsz=512 nbs=128 amp=False");
    expect(uinst, ARGC(uinst), CMDLINE_NBS, "nbs=", 128, 64,
           "python3 /usr/local/bin/yolo train model=yolov8n.pt --batch=64 imgsz=640 nbs=64 amp=False");
    EXPECT(cmdline_switch_state(uinst, ARGC(uinst), "amp") == 0);
    const char *uamp[] = { "yolo", "train", "--amp", "batch=8" };
    EXPECT(cmdline_switch_state(uamp, ARGC(uamp), "amp") == 1);
    const char *uamp0[] = { "yolo", "train", "--amp=0", "batch=8" };
    EXPECT(cmdline_switch_state(uamp0, ARGC(uamp0), "amp") == 0);
    EXPECT(cmdline_switch_state(frac, ARGC(frac), "amp") == -1); /* default True: the caller's */
    /* "--batch 16" is refused by Ultralytics (--batch is no boolean key): not its batch */
    const char *usep[] = { "yolo", "train", "--batch", "16" };
    expect(usep, ARGC(usep), CMDLINE_BATCH, NULL, 0, 0, NULL);

    /* a missing batch appended in the family's own spelling */
    const char *unob[] = { "yolo", "train", "model=yolov8s.pt" };
    cmdline_find(unob, ARGC(unob), CMDLINE_BATCH, &f);
    EXPECT(strcmp(cmdline_append_name(unob, ARGC(unob), CMDLINE_BATCH), "batch=") == 0);
    EXPECT(cmdline_append_name(unob, ARGC(unob), CMDLINE_ACCUM) == NULL);
    struct cmdline_edit ue = { &f, cmdline_append_name(unob, ARGC(unob), CMDLINE_BATCH), 8 };
    size_t un;
    c = cmdline_with_edits(unob, ARGC(unob), &ue, 1, &un);
    join(c, un, line, sizeof line);
    EXPECT(un == 4 && strcmp(line, "yolo train model=yolov8s.pt batch=8") == 0);
    cmdline_free(c, un);

    /* Hugging Face dashed spellings and booleans */
    const char *hfd[] = { "python3",
                          "run_clm.py",
                          "--per-device-train-batch-size",
                          "8",
                          "--per-device-eval-batch-size",
                          "16",
                          "--gradient-accumulation-steps",
                          "4",
                          "--gradient-checkpointing",
                          "--fp16",
                          "Y",
                          "--bf16",
                          "f",
                          "--tf32",
                          "NO" };
    EXPECT(cmdline_family(hfd, ARGC(hfd)) == CMDLINE_HF);
    expect(hfd, ARGC(hfd), CMDLINE_ACCUM, "--gradient-accumulation-steps", 4, 8,
           "python3 run_clm.py --per-device-train-batch-size 8 --per-device-eval-batch-size 16 "
           "--gradient-accumulation-steps 8 --gradient-checkpointing --fp16 Y --bf16 f --tf32 NO");
    expect(hfd, ARGC(hfd), CMDLINE_EVAL_BATCH, "--per-device-eval-batch-size", 16, 8,
           "python3 run_clm.py --per-device-train-batch-size 8 --per-device-eval-batch-size 8 "
           "--gradient-accumulation-steps 4 --gradient-checkpointing --fp16 Y --bf16 f --tf32 NO");
    EXPECT(cmdline_switch_on(hfd, ARGC(hfd), "--gradient_checkpointing"));
    EXPECT(cmdline_switch_on(hfd, ARGC(hfd), "--fp16"));
    EXPECT(cmdline_switch_state(hfd, ARGC(hfd), "--bf16") == 0);
    EXPECT(cmdline_switch_state(hfd, ARGC(hfd), "--tf32") == 0);
    const char *hfbool[] = { "python3", "run.py",   "--per_device_train_batch_size",
                             "2",       "--fp16=T", "--gradient_checkpointing=N" };
    EXPECT(cmdline_switch_on(hfbool, ARGC(hfbool), "--fp16"));
    EXPECT(cmdline_switch_state(hfbool, ARGC(hfbool), "--gradient_checkpointing") == 0);
    const char *hfeval[] = { "python3", "run.py", "--per_device_eval_batch_size=4" };
    EXPECT(cmdline_family(hfeval, ARGC(hfeval)) == CMDLINE_HF);

    /* generic accumulation flags */
    const char *acc1[] = { "python3", "examples/train_torch.py", "--batch", "16", "--accumulate",
                           "2" };
    expect(acc1, ARGC(acc1), CMDLINE_ACCUM, "--accumulate", 2, 4,
           "python3 examples/train_torch.py --batch 16 --accumulate 4");
    const char *acc2[] = { "python3", "t.py", "--grad-accum=3" };
    expect(acc2, ARGC(acc2), CMDLINE_ACCUM, "--grad-accum=", 3, 6, "python3 t.py --grad-accum=6");
    const char *acc3[] = { "python3", "t.py", "--grad_accum", "5" };
    expect(acc3, ARGC(acc3), CMDLINE_ACCUM, "--grad_accum", 5, 1, "python3 t.py --grad_accum 1");

    /* launchers: the script and its arguments after the launcher's own options */
    const char *tr[] = { "torchrun",
                         "--nnodes",
                         "2",
                         "--nproc-per-node=4",
                         "--master_port",
                         "29500",
                         "--standalone",
                         "train_dual.py",
                         "--batch",
                         "64",
                         "--cfg",
                         "yolov9-s.yaml" };
    struct cmdline_job j;
    cmdline_job_parse(tr, ARGC(tr), &j);
    EXPECT(j.launcher == CMDLINE_LAUNCH_TORCHRUN && j.script == 7 && j.args == 8 && j.nproc == 4 &&
          j.nnodes == 2);
    EXPECT(j.world_size == 8 && cmdline_world_size(tr, ARGC(tr)) == 8);
    EXPECT(strcmp(cmdline_launcher_name(j.launcher), "torchrun") == 0);
    EXPECT(cmdline_family(tr, ARGC(tr)) == CMDLINE_YOLO);
    expect(tr, ARGC(tr), CMDLINE_BATCH, "--batch", 64, 32,
           "torchrun --nnodes 2 --nproc-per-node=4 --master_port 29500 --standalone train_dual.py --batch 32 --cfg yolov9-s.yaml");
    expect_launch(
            tr, ARGC(tr), 2,
            "torchrun --nnodes 2 --nproc-per-node=2 --master_port 29500 --standalone train_dual.py --batch 64 --cfg yolov9-s.yaml");
    /* a launcher option that looks like a script's is never the script's */
    const char *acc_l[] = { "accelerate",
                            "launch",
                            "--num-processes",
                            "2",
                            "--gradient_accumulation_steps",
                            "8",
                            "--mixed_precision",
                            "fp16",
                            "--multi_gpu",
                            "train.py",
                            "--batch_size",
                            "4" };
    cmdline_job_parse(acc_l, ARGC(acc_l), &j);
    EXPECT(j.launcher == CMDLINE_LAUNCH_ACCELERATE && j.script == 9 && j.world_size == 2);
    expect(acc_l, ARGC(acc_l), CMDLINE_ACCUM, NULL, 0, 0, NULL);
    expect(acc_l, ARGC(acc_l), CMDLINE_BATCH, "--batch_size", 4, 2,
           "accelerate launch --num-processes 2 --gradient_accumulation_steps 8 --mixed_precision fp16 --multi_gpu "
           "train.py --batch_size 2");
    expect_launch(
            acc_l, ARGC(acc_l), 4,
            "accelerate launch --num-processes 4 --gradient_accumulation_steps 8 --mixed_precision fp16 "
            "--multi_gpu train.py --batch_size 4");
    const char *acc_n[] = { "accelerate", "launch", "run_clm.py", "--per_device_train_batch_size",
                            "8" };
    EXPECT(cmdline_world_size(acc_n, ARGC(acc_n)) == 0); /* read from its config: unknown */
    expect_launch(acc_n, ARGC(acc_n), 2,
                  "accelerate launch --num_processes 2 run_clm.py --per_device_train_batch_size 8");
    const char *ds[] = { "deepspeed", "--num_gpus", "8",           "--master_port",
                         "29501",     "train.py",   "--deepspeed", "ds.json",
                         "-b",        "4" };
    cmdline_job_parse(ds, ARGC(ds), &j);
    EXPECT(j.launcher == CMDLINE_LAUNCH_DEEPSPEED && j.script == 5 && j.world_size == 8);
    expect(ds, ARGC(ds), CMDLINE_BATCH, "-b", 4, 2,
           "deepspeed --num_gpus 8 --master_port 29501 train.py --deepspeed ds.json -b 2");
    const char *ds_all[] = { "deepspeed", "train.py", "-b", "4" };
    EXPECT(cmdline_world_size(ds_all, ARGC(ds_all)) == 0);
    expect_launch(ds_all, ARGC(ds_all), 2, "deepspeed --num_gpus 2 train.py -b 4");
    const char *pyrun[] = { "python3",
                            "-m",
                            "torch.distributed.run",
                            "--nproc_per_node",
                            "8",
                            "--master_port",
                            "29500",
                            "train_dual.py",
                            "--batch",
                            "64",
                            "--device",
                            "0,1,2,3,4,5,6,7" };
    cmdline_job_parse(pyrun, ARGC(pyrun), &j);
    EXPECT(j.launcher == CMDLINE_LAUNCH_TORCHRUN && j.launcher_at == 1 && j.script == 7 &&
          j.world_size == 8);
    EXPECT(cmdline_family(pyrun, ARGC(pyrun)) == CMDLINE_YOLO);
    expect_launch(
            pyrun, ARGC(pyrun), 4,
            "python3 -m torch.distributed.run --nproc_per_node 4 --master_port 29500 train_dual.py --batch 64 "
            "--device 0,1,2,3,4,5,6,7");
    const char *legacy[] = { "python",
                             "-m",
                             "torch.distributed.launch",
                             "--nproc_per_node=2",
                             "--use_env",
                             "train.py",
                             "--batch-size",
                             "16",
                             "--weights",
                             "yolov7.pt" };
    cmdline_job_parse(legacy, ARGC(legacy), &j);
    EXPECT(j.launcher == CMDLINE_LAUNCH_TORCH_LAUNCH && j.script == 5 && j.world_size == 2);
    EXPECT(cmdline_is_yolo_accumulating(legacy, ARGC(legacy)));
    const char *trm[] = {
        "torchrun", "--nproc_per_node", "auto", "-m", "trainer.main", "--bs", "8"
    };
    cmdline_job_parse(trm, ARGC(trm), &j);
    EXPECT(j.module && j.script == 4 && j.nproc == 0 && j.world_size == 0);
    expect(trm, ARGC(trm), CMDLINE_BATCH, "--bs", 8, 4,
           "torchrun --nproc_per_node auto -m trainer.main --bs 4");
    const char *tr0[] = { "torchrun", "train.py" };
    EXPECT(cmdline_world_size(tr0, ARGC(tr0)) == 1);
    expect_launch(tr0, ARGC(tr0), 2, "torchrun --nproc_per_node 2 train.py");
    const char *plain[] = { "python3", "main.py", "--bs", "8" };
    EXPECT(cmdline_world_size(plain, ARGC(plain)) == 1);
    /* accelerate's other commands launch nothing */
    const char *acfg[] = { "accelerate", "config", "--num_processes", "2" };
    cmdline_job_parse(acfg, ARGC(acfg), &j);
    EXPECT(j.launcher == CMDLINE_LAUNCH_NONE);

    /* a multi-GPU command from a plain Python one: the interpreter's options stay in front of -m */
    const char *unbuf[] = { "python3", "-u", "train_dual.py", "--batch", "64", "--device", "0" };
    expect_launch(
            unbuf, ARGC(unbuf), 8,
            "python3 -u -m torch.distributed.run --nproc_per_node 8 train_dual.py --batch 64 --device 0");
    const char *wopt[] = { "python", "-W", "ignore", "-X", "faulthandler", "train.py", "-b", "4" };
    expect_launch(
            wopt, ARGC(wopt), 2,
            "python -W ignore -X faulthandler -m torch.distributed.run --nproc_per_node 2 train.py -b 4");
    const char *pymod[] = { "python3", "-u", "-m", "trainer", "-b", "4" };
    expect_launch(pymod, ARGC(pymod), 2,
                  "python3 -u -m torch.distributed.run --nproc_per_node 2 -m trainer -b 4");
    const char *pyc[] = { "python3", "-c", "import t; t.main()" };
    expect_launch(pyc, ARGC(pyc), 2, NULL);
    const char *exe[] = { "./train", "-b", "4" };
    expect_launch(exe, ARGC(exe), 2, NULL);
    expect_launch(NULL, 0, 2, NULL);

    /* what the batch counts under several processes, and a batch YOLO accepts on them */
    EXPECT(cmdline_batch_scope(tr, ARGC(tr)) == CMDLINE_BATCH_TOTAL);
    EXPECT(cmdline_batch_scope(uinst, ARGC(uinst)) == CMDLINE_BATCH_TOTAL);
    EXPECT(cmdline_batch_scope(hfd, ARGC(hfd)) == CMDLINE_BATCH_PER_RANK);
    EXPECT(cmdline_batch_scope(ds, ARGC(ds)) == CMDLINE_BATCH_PER_RANK);
    EXPECT(cmdline_batch_for_world(tr, ARGC(tr), 52, 8) == 48);
    EXPECT(cmdline_batch_for_world(tr, ARGC(tr), 5, 8) == 8);
    EXPECT(cmdline_batch_for_world(tr, ARGC(tr), 64, 1) == 64);
    EXPECT(cmdline_batch_for_world(hfd, ARGC(hfd), 52, 8) == 52);
}

int main(void)
{
    const char *yolo[] = { "python",    "train_dual.py",
                           "--workers", "8",
                           "--device",  "0",
                           "--batch",   "64",
                           "--data",    "data.yaml",
                           "--img",     "640",
                           "--cfg",     "models/detect/yolov9-s.yaml" };
    expect(yolo, ARGC(yolo), CMDLINE_BATCH, "--batch", 64, 32,
           "python train_dual.py --workers 8 --device 0 --batch 32 --data data.yaml --img 640 --cfg models/detect/yolov9-s.yaml");
    expect(yolo, ARGC(yolo), CMDLINE_IMAGE, "--img", 640, 512,
           "python train_dual.py --workers 8 --device 0 --batch 64 --data data.yaml --img 512 --cfg models/detect/yolov9-s.yaml");
    EXPECT(cmdline_is_yolo_accumulating(yolo, ARGC(yolo)));

    const char *yolo_eq[] = { "python3",         "-u",        "train.py", "--batch-size=16",
                              "--img-size=1280", "--weights", "yolov7.pt" };
    expect(yolo_eq, ARGC(yolo_eq), CMDLINE_BATCH, "--batch-size=", 16, 8,
           "python3 -u train.py --batch-size=8 --img-size=1280 --weights yolov7.pt");
    expect(yolo_eq, ARGC(yolo_eq), CMDLINE_IMAGE, "--img-size=", 1280, 960,
           "python3 -u train.py --batch-size=16 --img-size=960 --weights yolov7.pt");
    EXPECT(cmdline_is_yolo_accumulating(yolo_eq, ARGC(yolo_eq)));

    const char *imgsz[] = { "python3", "train.py", "--imgsz", "640", "--batch-size", "24" };
    expect(imgsz, ARGC(imgsz), CMDLINE_IMAGE, "--imgsz", 640, 320,
           "python3 train.py --imgsz 320 --batch-size 24");
    expect(imgsz, ARGC(imgsz), CMDLINE_BATCH, "--batch-size", 24, 12,
           "python3 train.py --imgsz 640 --batch-size 12");
    EXPECT(!cmdline_is_yolo_accumulating(imgsz, ARGC(imgsz)));

    const char *ultra[] = { "yolo",     "train",    "model=yolov8n.pt", "data=coco8.yaml",
                            "batch=16", "imgsz=640" };
    expect(ultra, ARGC(ultra), CMDLINE_BATCH, "batch=", 16, 40,
           "yolo train model=yolov8n.pt data=coco8.yaml batch=40 imgsz=640");
    expect(ultra, ARGC(ultra), CMDLINE_IMAGE, "imgsz=", 640, 480,
           "yolo train model=yolov8n.pt data=coco8.yaml batch=16 imgsz=480");

    const char *autobatch[] = { "yolo", "train", "model=yolov8n.pt", "batch=-1" };
    expect(autobatch, ARGC(autobatch), CMDLINE_BATCH, NULL, 0, 0, NULL);
    const char *fraction[] = { "yolo", "train", "batch=0.7" };
    expect(fraction, ARGC(fraction), CMDLINE_BATCH, NULL, 0, 0, NULL);
    const char *yolo_auto[] = { "python", "train.py", "--batch", "-1" };
    expect(yolo_auto, ARGC(yolo_auto), CMDLINE_BATCH, NULL, 0, 0, NULL);

    const char *hf[] = { "torchrun",   "--nproc_per_node=2",
                         "run_clm.py", "--model_name_or_path",
                         "gpt2",       "--per_device_train_batch_size",
                         "8",          "--gradient_accumulation_steps",
                         "4",          "--fp16" };
    expect(hf, ARGC(hf), CMDLINE_BATCH, "--per_device_train_batch_size", 8, 4,
           "torchrun --nproc_per_node=2 run_clm.py --model_name_or_path gpt2 --per_device_train_batch_size 4 --gradient_accumulation_steps 4 --fp16");
    expect(hf, ARGC(hf), CMDLINE_IMAGE, NULL, 0, 0, NULL);

    const char *bs[] = { "python3", "main.py", "--bs", "128", "--lr", "0.1" };
    expect(bs, ARGC(bs), CMDLINE_BATCH, "--bs", 128, 96, "python3 main.py --bs 96 --lr 0.1");
    const char *b[] = { "./train", "-b", "32", "--epochs", "3" };
    expect(b, ARGC(b), CMDLINE_BATCH, "-b", 32, 16, "./train -b 16 --epochs 3");
    /* python's own -b (bytes warnings) is not the script's */
    const char *pyb[] = { "python3", "-b", "train.py", "--epochs", "3" };
    expect(pyb, ARGC(pyb), CMDLINE_BATCH, NULL, 0, 0, NULL);
    const char *mod[] = { "python3", "-m", "trainer", "-b", "4" };
    expect(mod, ARGC(mod), CMDLINE_BATCH, "-b", 4, 2, "python3 -m trainer -b 2");
    /* the last of repeated flags wins, as with argparse */
    const char *twice[] = { "python3", "t.py", "--batch", "8", "--batch", "12" };
    expect(twice, ARGC(twice), CMDLINE_BATCH, "--batch", 12, 6, "python3 t.py --batch 8 --batch 6");
    /* flags after "--" belong to someone else; a flag at the end has no value */
    const char *dashdash[] = { "python3", "t.py", "--", "--batch", "8" };
    expect(dashdash, ARGC(dashdash), CMDLINE_BATCH, NULL, 0, 0, NULL);
    const char *dangling[] = { "python3", "t.py", "--batch" };
    expect(dangling, ARGC(dangling), CMDLINE_BATCH, NULL, 0, 0, NULL);
    /* look-alike flags are not batch flags */
    const char *alike[] = { "python3", "t.py", "--batches", "3", "--batch-sizes=4", "--imgs", "5" };
    expect(alike, ARGC(alike), CMDLINE_BATCH, NULL, 0, 0, NULL);
    expect(alike, ARGC(alike), CMDLINE_IMAGE, NULL, 0, 0, NULL);
    expect(NULL, 0, CMDLINE_BATCH, NULL, 0, 0, NULL);

    /* same job: only the values may differ */
    const char *a16[] = {
        "python3", "train.py", "--batch-size=16", "--imgsz", "640", "--cfg", "s"
    };
    const char *a32[] = {
        "python3", "train.py", "--batch-size=32", "--imgsz", "512", "--cfg", "s"
    };
    const char *m32[] = {
        "python3", "train.py", "--batch-size=32", "--imgsz", "640", "--cfg", "m"
    };
    const char *s32[] = {
        "python3", "train.py", "--batch_size=32", "--imgsz", "640", "--cfg", "s"
    };
    EXPECT(cmdline_same_job(a16, ARGC(a16), a32, ARGC(a32)));
    EXPECT(!cmdline_same_job(a16, ARGC(a16), m32, ARGC(m32)));
    EXPECT(!cmdline_same_job(a16, ARGC(a16), s32, ARGC(s32)));
    EXPECT(!cmdline_same_job(a16, ARGC(a16), yolo, ARGC(yolo)));
    EXPECT(cmdline_same_job(ultra, ARGC(ultra), ultra, ARGC(ultra)));

    /* the family decides what the script already does by itself */
    EXPECT(cmdline_family(yolo, ARGC(yolo)) == CMDLINE_YOLO);
    EXPECT(cmdline_family(ultra, ARGC(ultra)) == CMDLINE_ULTRALYTICS);
    EXPECT(cmdline_family(imgsz, ARGC(imgsz)) == CMDLINE_GENERIC);
    /* Hugging Face's dashed alias of the same option: one job at two batch sizes */
    const char *hfd16[] = { "python3", "run_clm.py",   "--per-device-train-batch-size",
                            "16",      "--output_dir", "out" };
    const char *hfd40[] = { "python3", "run_clm.py",   "--per-device-train-batch-size",
                            "40",      "--output_dir", "out" };
    EXPECT(cmdline_family(hfd16, ARGC(hfd16)) == CMDLINE_HF);
    EXPECT(cmdline_same_job(hfd16, ARGC(hfd16), hfd40, ARGC(hfd40)));
    expect(hfd16, ARGC(hfd16), CMDLINE_BATCH, "--per-device-train-batch-size", 16, 8,
           "python3 run_clm.py --per-device-train-batch-size 8 --output_dir out");
    const char *hfx[] = { "python3",
                          "run_clm.py",
                          "--per_device_train_batch_size",
                          "16",
                          "--gradient_accumulation_steps=2",
                          "--fp16",
                          "False",
                          "--bf16=true",
                          "--gradient_checkpointing",
                          "--output_dir",
                          "out" };
    EXPECT(cmdline_family(hfx, ARGC(hfx)) == CMDLINE_HF);
    expect(hfx, ARGC(hfx), CMDLINE_ACCUM, "--gradient_accumulation_steps=", 2, 4,
           "python3 run_clm.py --per_device_train_batch_size 16 --gradient_accumulation_steps=4 --fp16 False --bf16=true "
           "--gradient_checkpointing --output_dir out");
    EXPECT(!cmdline_switch_on(hfx, ARGC(hfx), "--fp16"));
    EXPECT(cmdline_switch_on(hfx, ARGC(hfx), "--bf16"));
    EXPECT(cmdline_switch_on(hfx, ARGC(hfx), "--gradient_checkpointing"));
    EXPECT(!cmdline_switch_on(hfx, ARGC(hfx), "--tf32"));
    /* a switch after "--" belongs to another program */
    const char *after[] = { "python3", "launch.py", "--", "--fp16" };
    EXPECT(!cmdline_switch_on(after, ARGC(after), "--fp16"));

    /* edits: a found flag rewritten in place, a missing one and a switch appended */
    const char *hf2[] = { "python3", "run_clm.py",   "--per_device_train_batch_size",
                          "16",      "--output_dir", "out" };
    struct cmdline_flag bf, acc;
    cmdline_find(hf2, ARGC(hf2), CMDLINE_BATCH, &bf);
    cmdline_find(hf2, ARGC(hf2), CMDLINE_ACCUM, &acc);
    EXPECT(bf.found && !acc.found);
    struct cmdline_edit edits[] = { { &bf, NULL, 8 },
                                    { &acc, "--gradient_accumulation_steps", 2 },
                                    { NULL, "--gradient_checkpointing", 0 } };
    size_t n = 0;
    char **c = cmdline_with_edits(hf2, ARGC(hf2), edits, 3, &n);
    char line[512] = "";
    for (size_t i = 0; i < n; i++) {
        strcat(line, i ? " " : "");
        strcat(line, c[i]);
    }
    EXPECT(strcmp(line, "python3 run_clm.py --per_device_train_batch_size 8 --output_dir out "
                       "--gradient_accumulation_steps 2 --gradient_checkpointing") == 0);
    EXPECT(c[n] == NULL);
    cmdline_free(c, n);

    test_families_and_launchers();

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    puts("cmdline: all checks passed");
    return 0;
}
