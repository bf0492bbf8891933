/* test_cmdline.c: finding and rewriting batch and image flags on real-world command lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"

static int failures;

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                  \
		}                                                                    \
	} while (0)

#define ARGC(a) (sizeof(a) / sizeof((a)[0]))

/* Finds the flag, rewrites it to value and compares the whole rewritten line with want. */
static void expect(const char *const *argv, size_t argc, enum cmdline_kind kind, const char *name, long long value,
                   long long new_value, const char *want)
{
	struct cmdline_flag f;
	cmdline_find(argv, argc, kind, &f);
	if (!name) {
		CHECK(!f.found);
		return;
	}
	CHECK(f.found);
	if (!f.found)
		return;
	if (strcmp(f.name, name) != 0) {
		fprintf(stderr, "flag %s, expected %s\n", f.name, name);
		failures++;
	}
	CHECK(f.value == value);
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

int main(void)
{
	const char *yolo[] = {"python", "train_dual.py", "--workers", "8", "--device", "0", "--batch", "64", "--data",
	                      "data.yaml", "--img", "640", "--cfg", "models/detect/yolov9-s.yaml"};
	expect(yolo, ARGC(yolo), CMDLINE_BATCH, "--batch", 64, 32,
	       "python train_dual.py --workers 8 --device 0 --batch 32 --data data.yaml --img 640 --cfg models/detect/yolov9-s.yaml");
	expect(yolo, ARGC(yolo), CMDLINE_IMAGE, "--img", 640, 512,
	       "python train_dual.py --workers 8 --device 0 --batch 64 --data data.yaml --img 512 --cfg models/detect/yolov9-s.yaml");
	CHECK(cmdline_is_yolo_accumulating(yolo, ARGC(yolo)));

	const char *yolo_eq[] = {"python3", "-u", "train.py", "--batch-size=16", "--img-size=1280", "--weights", "yolov7.pt"};
	expect(yolo_eq, ARGC(yolo_eq), CMDLINE_BATCH, "--batch-size=", 16, 8,
	       "python3 -u train.py --batch-size=8 --img-size=1280 --weights yolov7.pt");
	expect(yolo_eq, ARGC(yolo_eq), CMDLINE_IMAGE, "--img-size=", 1280, 960,
	       "python3 -u train.py --batch-size=16 --img-size=960 --weights yolov7.pt");
	CHECK(cmdline_is_yolo_accumulating(yolo_eq, ARGC(yolo_eq)));

	const char *imgsz[] = {"python3", "train.py", "--imgsz", "640", "--batch-size", "24"};
	expect(imgsz, ARGC(imgsz), CMDLINE_IMAGE, "--imgsz", 640, 320, "python3 train.py --imgsz 320 --batch-size 24");
	expect(imgsz, ARGC(imgsz), CMDLINE_BATCH, "--batch-size", 24, 12, "python3 train.py --imgsz 640 --batch-size 12");
	CHECK(!cmdline_is_yolo_accumulating(imgsz, ARGC(imgsz)));

	const char *ultra[] = {"yolo", "train", "model=yolov8n.pt", "data=coco8.yaml", "batch=16", "imgsz=640"};
	expect(ultra, ARGC(ultra), CMDLINE_BATCH, "batch=", 16, 40, "yolo train model=yolov8n.pt data=coco8.yaml batch=40 imgsz=640");
	expect(ultra, ARGC(ultra), CMDLINE_IMAGE, "imgsz=", 640, 480, "yolo train model=yolov8n.pt data=coco8.yaml batch=16 imgsz=480");

	const char *autobatch[] = {"yolo", "train", "model=yolov8n.pt", "batch=-1"};
	expect(autobatch, ARGC(autobatch), CMDLINE_BATCH, NULL, 0, 0, NULL);
	const char *fraction[] = {"yolo", "train", "batch=0.7"};
	expect(fraction, ARGC(fraction), CMDLINE_BATCH, NULL, 0, 0, NULL);
	const char *yolo_auto[] = {"python", "train.py", "--batch", "-1"};
	expect(yolo_auto, ARGC(yolo_auto), CMDLINE_BATCH, NULL, 0, 0, NULL);

	const char *hf[] = {"torchrun", "--nproc_per_node=2", "run_clm.py", "--model_name_or_path", "gpt2",
	                    "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "4", "--fp16"};
	expect(hf, ARGC(hf), CMDLINE_BATCH, "--per_device_train_batch_size", 8, 4,
	       "torchrun --nproc_per_node=2 run_clm.py --model_name_or_path gpt2 --per_device_train_batch_size 4 --gradient_accumulation_steps 4 --fp16");
	expect(hf, ARGC(hf), CMDLINE_IMAGE, NULL, 0, 0, NULL);

	const char *bs[] = {"python3", "main.py", "--bs", "128", "--lr", "0.1"};
	expect(bs, ARGC(bs), CMDLINE_BATCH, "--bs", 128, 96, "python3 main.py --bs 96 --lr 0.1");
	const char *b[] = {"./train", "-b", "32", "--epochs", "3"};
	expect(b, ARGC(b), CMDLINE_BATCH, "-b", 32, 16, "./train -b 16 --epochs 3");
	/* python's own -b (bytes warnings) is not the script's */
	const char *pyb[] = {"python3", "-b", "train.py", "--epochs", "3"};
	expect(pyb, ARGC(pyb), CMDLINE_BATCH, NULL, 0, 0, NULL);
	const char *mod[] = {"python3", "-m", "trainer", "-b", "4"};
	expect(mod, ARGC(mod), CMDLINE_BATCH, "-b", 4, 2, "python3 -m trainer -b 2");
	/* the last of repeated flags wins, as with argparse */
	const char *twice[] = {"python3", "t.py", "--batch", "8", "--batch", "12"};
	expect(twice, ARGC(twice), CMDLINE_BATCH, "--batch", 12, 6, "python3 t.py --batch 8 --batch 6");
	/* flags after "--" belong to someone else; a flag at the end has no value */
	const char *dashdash[] = {"python3", "t.py", "--", "--batch", "8"};
	expect(dashdash, ARGC(dashdash), CMDLINE_BATCH, NULL, 0, 0, NULL);
	const char *dangling[] = {"python3", "t.py", "--batch"};
	expect(dangling, ARGC(dangling), CMDLINE_BATCH, NULL, 0, 0, NULL);
	/* look-alike flags are not batch flags */
	const char *alike[] = {"python3", "t.py", "--batches", "3", "--batch-sizes=4", "--imgs", "5"};
	expect(alike, ARGC(alike), CMDLINE_BATCH, NULL, 0, 0, NULL);
	expect(alike, ARGC(alike), CMDLINE_IMAGE, NULL, 0, 0, NULL);
	expect(NULL, 0, CMDLINE_BATCH, NULL, 0, 0, NULL);

	/* same job: only the values may differ */
	const char *a16[] = {"python3", "train.py", "--batch-size=16", "--imgsz", "640", "--cfg", "s"};
	const char *a32[] = {"python3", "train.py", "--batch-size=32", "--imgsz", "512", "--cfg", "s"};
	const char *m32[] = {"python3", "train.py", "--batch-size=32", "--imgsz", "640", "--cfg", "m"};
	const char *s32[] = {"python3", "train.py", "--batch_size=32", "--imgsz", "640", "--cfg", "s"};
	CHECK(cmdline_same_job(a16, ARGC(a16), a32, ARGC(a32)));
	CHECK(!cmdline_same_job(a16, ARGC(a16), m32, ARGC(m32)));
	CHECK(!cmdline_same_job(a16, ARGC(a16), s32, ARGC(s32)));
	CHECK(!cmdline_same_job(a16, ARGC(a16), yolo, ARGC(yolo)));
	CHECK(cmdline_same_job(ultra, ARGC(ultra), ultra, ARGC(ultra)));

	/* the family decides what the script already does by itself */
	CHECK(cmdline_family(yolo, ARGC(yolo)) == CMDLINE_YOLO);
	CHECK(cmdline_family(ultra, ARGC(ultra)) == CMDLINE_ULTRALYTICS);
	CHECK(cmdline_family(imgsz, ARGC(imgsz)) == CMDLINE_GENERIC);
	/* Hugging Face's dashed alias of the same option: one job at two batch sizes */
	const char *hfd16[] = {"python3", "run_clm.py", "--per-device-train-batch-size", "16", "--output_dir", "out"};
	const char *hfd40[] = {"python3", "run_clm.py", "--per-device-train-batch-size", "40", "--output_dir", "out"};
	CHECK(cmdline_family(hfd16, ARGC(hfd16)) == CMDLINE_HF);
	CHECK(cmdline_same_job(hfd16, ARGC(hfd16), hfd40, ARGC(hfd40)));
	expect(hfd16, ARGC(hfd16), CMDLINE_BATCH, "--per-device-train-batch-size", 16, 8,
	       "python3 run_clm.py --per-device-train-batch-size 8 --output_dir out");
	const char *hfx[] = {"python3", "run_clm.py", "--per_device_train_batch_size", "16", "--gradient_accumulation_steps=2",
	                    "--fp16", "False", "--bf16=true", "--gradient_checkpointing", "--output_dir", "out"};
	CHECK(cmdline_family(hfx, ARGC(hfx)) == CMDLINE_HF);
	expect(hfx, ARGC(hfx), CMDLINE_ACCUM, "--gradient_accumulation_steps=", 2, 4,
	       "python3 run_clm.py --per_device_train_batch_size 16 --gradient_accumulation_steps=4 --fp16 False --bf16=true "
	       "--gradient_checkpointing --output_dir out");
	CHECK(!cmdline_switch_on(hfx, ARGC(hfx), "--fp16"));
	CHECK(cmdline_switch_on(hfx, ARGC(hfx), "--bf16"));
	CHECK(cmdline_switch_on(hfx, ARGC(hfx), "--gradient_checkpointing"));
	CHECK(!cmdline_switch_on(hfx, ARGC(hfx), "--tf32"));
	/* a switch after "--" belongs to another program */
	const char *after[] = {"python3", "launch.py", "--", "--fp16"};
	CHECK(!cmdline_switch_on(after, ARGC(after), "--fp16"));

	/* edits: a found flag rewritten in place, a missing one and a switch appended */
	const char *hf2[] = {"python3", "run_clm.py", "--per_device_train_batch_size", "16", "--output_dir", "out"};
	struct cmdline_flag bf, acc;
	cmdline_find(hf2, ARGC(hf2), CMDLINE_BATCH, &bf);
	cmdline_find(hf2, ARGC(hf2), CMDLINE_ACCUM, &acc);
	CHECK(bf.found && !acc.found);
	struct cmdline_edit edits[] = {{&bf, NULL, 8}, {&acc, "--gradient_accumulation_steps", 2},
	                               {NULL, "--gradient_checkpointing", 0}};
	size_t n = 0;
	char **c = cmdline_with_edits(hf2, ARGC(hf2), edits, 3, &n);
	char line[512] = "";
	for (size_t i = 0; i < n; i++) {
		strcat(line, i ? " " : "");
		strcat(line, c[i]);
	}
	CHECK(strcmp(line, "python3 run_clm.py --per_device_train_batch_size 8 --output_dir out "
	                   "--gradient_accumulation_steps 2 --gradient_checkpointing") == 0);
	CHECK(c[n] == NULL);
	cmdline_free(c, n);

	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	puts("cmdline: all checks passed");
	return 0;
}
