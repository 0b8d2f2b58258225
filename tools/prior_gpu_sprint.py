"""Continue `akd prior train --stage transformer` on a GPU for a fixed wall-clock budget, then bring it back.

400 s of the prior's transformer training on one GPU (an H100) do the work of about 20 h on 2 CPU cores, but a
rented or shared GPU machine usually lacks this project's environment and is paid by the minute. So a GPU run is
three resumable stages, the GPU one with a fixed budget under 15 min, so that a short rental suffices; only the
packed data (47 MiB for 1800 clips with a diffusers wheel) and a weights file travel:

    # 1. here: pack what the GPU needs (frames, frozen prompt embeddings, the checkpoint's weights, diffusers wheel)
    OMP_NUM_THREADS=1 .venv/bin/python tools/prior_gpu_sprint.py pack --data runs/prior_data_side \\
        --model runs/prior_model_side --out .gpu_side --wheels WHEEL_DIR
    # 2. on the GPU machine (copy .gpu_side and this checkout there; needs torch; if diffusers is missing,
    #    `pip install --target DIR .gpu_side/*.whl` and put DIR on PYTHONPATH), then copy OUT back:
    python3 tools/prior_gpu_sprint.py train --pack .gpu_side --out OUT --seconds 400 --batch 64 --lr 4e-4
    #    (--contrast-weight 10 --contrast-partner 0.5: the contrastive term of `akd prior train --contrast-weight`)
    # 3. here: put the weights back into the CPU checkpoint, then write the folder with one CPU step
    .venv/bin/python tools/prior_gpu_sprint.py unpack --model runs/prior_model_side --weights OUT/sprint_model.pt
    akd prior train --data runs/prior_data_side --out runs/prior_model_side --stage transformer --steps N+1 --resume

`train` encodes the packed frames with the shipped VAE (the checkpoint's VAE: `pack` checks the fingerprints),
trains with AdamW, a warm-up and a cosine decay to 0.1x over the budget, the same loss, caption dropout and
validation split as `akd prior train`, and every ``--val-every`` steps prints the validation v-MSE (caption /
empty prompt) and the diffusion-classifier confusion over the validation clips (rows: clip gait; columns: the
gait caption with the lowest error; bench/bench_prior_captions.py's captions). Weights and a JSON log are saved
every 90 s, so a run cut off at its time limit still leaves them. Speeds measured with it (one NVIDIA H100,
29.6-34.4 steps/s at batch 64): docs/prior_training.md, "How long it takes".
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akd_core.sds.prior.cogvideox import rotary_embeddings  # noqa: E402
from akd_core.sds.prior.tiny import TINY_SCHEDULER_CONFIG  # noqa: E402
from akd_core.sds.prior.train_transformer import (  # noqa: E402
    PromptTable,
    TransformerTrainConfig,
    build_text_encoder,
    build_transformer,
    contrastive_loss,
    encode_clips,
    load_frozen_vae,
    rival_prompts,
    transformer_loss,
    vae_fingerprint,
    validation_mse,
)
from akd_core.sds.prior.training import load_clips, split_clips  # noqa: E402

CAPTIONS = {"trot": "a dog trotting", "pace": "a dog pacing", "bound": "a dog bounding",
            "gallop": "a dog galloping", "walk": "a dog walking", "standing": "a dog standing still"}
SHIPPED = Path(__file__).resolve().parents[1] / "models" / "akd-gaits-tiny"


def checkpoint_path(model: Path) -> Path:
    return model / "checkpoints" / "transformer.pt"


def pack(args: argparse.Namespace) -> None:
    state = torch.load(checkpoint_path(args.model), map_location="cpu", weights_only=False)
    frames, prompts, index = load_clips(args.data)
    vae = load_frozen_vae(args.model, frames.shape[1])
    fingerprint = vae_fingerprint(vae)
    gpu_vae = vae_fingerprint(load_frozen_vae(args.vae, frames.shape[1]))  # the VAE `train` will encode with
    if fingerprint != state["vae_fingerprint"] or fingerprint != gpu_vae:
        sys.exit(f"the VAE of {args.model} is not the checkpoint's or {args.vae}'s: the GPU would encode differently")
    config = TransformerTrainConfig(**state["config"])
    tokenizer, text_encoder = build_text_encoder(config, list(state["tokenizer_words"]))
    text_encoder.load_state_dict(state["text_encoder"])
    rivals = rival_prompts(prompts, index, args.data)  # for `train --contrast-weight`
    table = PromptTable(tokenizer, text_encoder, config.text_len,
                        [*prompts, *config.sample_prompts, *(r for clip in rivals for r in clip)])
    classes = PromptTable(tokenizer, text_encoder, config.text_len, list(CAPTIONS.values()))
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "frames.npz", frames=frames.numpy())
    torch.save({"model": state["model"]}, args.out / "init_model.pt")
    torch.save({"embeds": table.embeds, "clip_rows": table.rows(prompts), "step": state["step"],
                "rival_rows": torch.stack([table.rows(r) for r in rivals]),
                "config": state["config"], "transformer_config": state["transformer_config"],
                "scaling_factor": state["scaling_factor"], "classes": list(CAPTIONS),
                "class_embeds": classes.embeds[classes.rows(list(CAPTIONS.values()))],
                "gaits": [clip["gait"] for clip in index["clips"]]}, args.out / "meta.pt")
    for wheel in sorted(Path(args.wheels).glob("*.whl")) if args.wheels else []:
        shutil.copy(wheel, args.out / wheel.name)
    size = sum(f.stat().st_size for f in args.out.iterdir()) / 2**20
    print(f"packed {len(prompts)} clips from step {state['step']} into {args.out} ({size:.1f} MiB)")


def train(args: argparse.Namespace) -> None:
    from diffusers import CogVideoXDDIMScheduler

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.backends.cuda.matmul.allow_tf32 = True
    meta = torch.load(args.pack / "meta.pt", weights_only=False)
    frames = torch.from_numpy(np.load(args.pack / "frames.npz")["frames"])
    vae = load_frozen_vae(args.vae, frames.shape[1]).to(device)
    tic = time.time()
    with torch.no_grad():
        mean, std = encode_clips(vae, frames, 64, device)
    scale = float(meta["scaling_factor"])
    mean = (mean * scale).permute(0, 2, 1, 3, 4).contiguous().to(device)
    std = (std * scale).permute(0, 2, 1, 3, 4).contiguous().to(device)
    print(f"encoded {tuple(mean.shape)} in {time.time() - tic:.1f} s", flush=True)
    config = TransformerTrainConfig(**{**meta["config"], "batch": 64})
    model = build_transformer(dict(meta["transformer_config"]), 0).to(device).train()
    model.load_state_dict(torch.load(args.pack / args.init, map_location="cpu")["model"])
    scheduler = CogVideoXDDIMScheduler(**TINY_SCHEDULER_CONFIG)
    scheduler.alphas_cumprod = scheduler.alphas_cumprod.to(device)
    shape = tuple(mean.shape[1:])
    rotary = rotary_embeddings(model.config, shape[0], shape[2], shape[3], device)
    embeds = meta["embeds"].to(device)
    rows = meta["clip_rows"]
    train_idx, val_idx = split_clips(mean.shape[0], config.val_fraction)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=config.weight_decay)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    train_t = torch.as_tensor(train_idx, device=device)
    rows_dev = rows.to(device)
    if args.contrast_weight > 0 and "rival_rows" not in meta:
        sys.exit(f"{args.pack} has no rival captions: pack it again with this version for --contrast-weight")
    rival_rows = meta["rival_rows"].to(device) if "rival_rows" in meta else None
    log: dict = {"start_step": meta["step"], "batch": args.batch, "lr": args.lr, "val": [], "loss": [],
                 "contrast": [args.contrast_weight, args.contrast_margin, args.contrast_partner],
                 "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu"}

    @torch.no_grad()
    def confusion() -> np.ndarray:
        model.eval()
        classes, class_embeds = meta["classes"], meta["class_embeds"].to(device)
        table = np.zeros((len(classes), len(classes)), int)
        gen = torch.Generator(device=device).manual_seed(123)
        for i in val_idx:
            if meta["gaits"][i] not in classes:
                continue
            z0 = mean[i:i + 1].expand(len(classes), *shape)
            err = torch.zeros(len(classes), device=device)
            for t in (200, 400, 600, 800):
                for _ in range(2):
                    noise = torch.randn((1, *shape), generator=gen, device=device).expand_as(z0)
                    tt = torch.full((len(classes),), t, device=device, dtype=torch.long)
                    pred = model(hidden_states=scheduler.add_noise(z0, noise, tt), encoder_hidden_states=class_embeds,
                                 timestep=tt, image_rotary_emb=rotary, return_dict=False)[0]
                    err += ((pred - scheduler.get_velocity(z0, noise, tt)) ** 2).mean(dim=(1, 2, 3, 4))
            table[classes.index(meta["gaits"][i]), int(err.argmin())] += 1
        model.train()
        return table

    def validate(step: int) -> None:
        cond, uncond = validation_mse(model, scheduler, mean[val_idx], rows[val_idx], SimpleNamespace(embeds=embeds),
                                      config, rotary, device)
        table = confusion()
        log["val"].append({"step": meta["step"] + step, "val_mse": cond, "val_mse_uncond": uncond,
                           "accuracy": float(np.trace(table) / max(1, table.sum())), "confusion": table.tolist()})
        print(json.dumps(log["val"][-1]), flush=True)

    def save() -> None:
        torch.save({"model": {k: v.detach().cpu() for k, v in model.state_dict().items()}}, out / "sprint_model.pt")
        (out / "sprint_log.json").write_text(json.dumps(log))

    validate(0)
    start = last_save = time.time()
    step = 0
    while (elapsed := time.time() - start) < args.seconds:
        cosine = 0.1 + 0.45 * (1 + math.cos(math.pi * elapsed / args.seconds))  # 1 -> 0.1 over the budget
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * cosine
        for group in optimizer.param_groups:
            group["lr"] = lr
        pick = train_t[torch.randint(0, len(train_idx), (args.batch,), generator=generator, device=device)]
        z = mean[pick] + std[pick] * torch.randn((args.batch, *shape), generator=generator, device=device)
        timesteps = torch.randint(0, 1000, (args.batch,), generator=generator, device=device)
        noise = torch.randn(z.shape, generator=generator, device=device)
        drop = torch.rand(args.batch, generator=generator, device=device) < config.cfg_dropout
        caption = torch.where(drop, torch.zeros_like(pick), rows_dev[pick])
        if args.contrast_weight > 0:  # as `akd prior train --contrast-weight` (column 0: the partner gait)
            which = torch.randint(0, rival_rows.shape[1], (args.batch,), generator=generator, device=device)
            partner = torch.rand(args.batch, generator=generator, device=device) < args.contrast_partner
            rival = rival_rows[pick, torch.where(partner, torch.zeros_like(which), which)]
            mse, hinge = contrastive_loss(model, scheduler, z, embeds[caption], embeds[rival], timesteps, noise,
                                          rotary, args.contrast_margin, ~drop)
            loss = mse + args.contrast_weight * hinge
        else:
            loss = transformer_loss(model, scheduler, z, embeds[caption], timesteps, noise, rotary)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        step += 1
        if step % 100 == 0:
            log["loss"].append({"step": meta["step"] + step, "loss": float(loss.detach()), "lr": lr})
        if step % args.val_every == 0:
            validate(step)
        if time.time() - last_save > 90:
            save()
            last_save = time.time()
    log["steps"], log["train_seconds"] = step, time.time() - start
    validate(step)
    save()
    print(f"done: {step} steps in {log['train_seconds']:.0f} s ({step / log['train_seconds']:.1f} steps/s); "
          f"checkpoint step {meta['step'] + step}", flush=True)


def unpack(args: argparse.Namespace) -> None:
    path = checkpoint_path(args.model)
    state = torch.load(path, map_location="cpu", weights_only=False)
    log = json.loads((args.weights.parent / "sprint_log.json").read_text())
    if log["start_step"] != state["step"]:
        sys.exit(f"{args.weights} continued step {log['start_step']}, but {path} is at step {state['step']}")
    backup = path.with_name(f"transformer_step{state['step']}.pt")
    shutil.copy(path, backup)
    state["model"] = torch.load(args.weights, map_location="cpu")["model"]
    state["step"] += log["steps"]
    torch.save(state, path)
    print(f"{path}: step {state['step']} (the CPU checkpoint it replaced: {backup}); write the folder with "
          f"`akd prior train ... --stage transformer --steps {state['step'] + 1} --resume`")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--model", type=Path, required=True, help="the `akd prior train --out` folder to continue")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--vae", type=Path, default=SHIPPED, help="the folder whose vae/ the GPU loads")
    p.add_argument("--wheels", type=Path, default=None, help="a folder of wheels to copy in (diffusers, ...)")
    p = sub.add_parser("train")
    p.add_argument("--pack", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--init", default="init_model.pt", help="weights file in --pack to start from")
    p.add_argument("--vae", type=Path, default=SHIPPED)
    p.add_argument("--seconds", type=float, default=400.0)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=4e-4)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--val-every", type=int, default=4000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default=None)
    p.add_argument("--contrast-weight", type=float, default=0.0, help="as `akd prior train` (0: plain v-MSE)")
    p.add_argument("--contrast-margin", type=float, default=0.1)
    p.add_argument("--contrast-partner", type=float, default=0.5)
    p = sub.add_parser("unpack")
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--weights", type=Path, required=True, help="sprint_model.pt (sprint_log.json beside it)")
    args = parser.parse_args()
    {"pack": pack, "train": train, "unpack": unpack}[args.command](args)


if __name__ == "__main__":
    main()
