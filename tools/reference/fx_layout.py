"""
ref2va packed layouts made by the reference's own builder, MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence
(before_denoise.py): positions, tags and index sets for mixes of image, video (with and without soundtrack) and
standalone audio references on the shared rotary clock, short and long (>= 16 latent frames, where a pairwise and a
sequential sum of the spans part). tests/fixtures/layout/ref2va.safetensors + cases.json.

Only the shapes of the encoded references matter to the builder, so the latents are zeros of those shapes.
"""

import pathlib
import types

import torch

from common import fresh_dir, log, save_tensors, write_json

PATCH = (1, 2, 2)
VIDEO_CHANNELS, AUDIO_CHANNELS = 4, 6

# name -> (text tags, target (latent frames, latent h, latent w, audio latents), references)
# a reference: ("image", h, w) | ("audio", A) | ("video", frames, h, w, soundtrack audio latents or 0)
CASES = {
    "one_image": ([1, 1, 0, 0, 0, 1, 1], (7, 4, 4, 12), [("image", 6, 4)]),
    "image_video_audio": ([1] * 5 + [0] * 4 + [1] * 3, (7, 4, 6, 12),
                          [("image", 4, 4), ("video", 2, 2, 6, 9), ("audio", 5)]),
    "silent_video_two_images": ([1] * 4, (7, 6, 4, 12), [("video", 7, 4, 4, 0), ("image", 2, 2), ("image", 4, 8)]),
    "soundtrack_longer_than_frames": ([1] * 3, (2, 2, 2, 5), [("video", 2, 2, 2, 20), ("audio", 3)]),
    "long_video": ([1] * 6, (7, 2, 4, 12), [("audio", 4), ("video", 37, 2, 2, 207), ("image", 2, 2)]),
}


def run(out_root: pathlib.Path) -> list:
    from diffusers.modular_pipelines.minimax_h3.before_denoise import MiniMaxH3Ref2VAPrepareLayoutStep

    root = fresh_dir(out_root / "layout")
    tensors, cases = {}, {}
    for name, (tags, (frames, height, width, audio), references) in CASES.items():
        refs, visual, sound = [], [], []
        for r in references:
            kind = r[0]
            has_audio = kind == "audio" or (kind == "video" and r[4] > 0)
            refs.append(types.SimpleNamespace(kind=kind, has_audio=has_audio))
            if kind == "image":
                visual.append(torch.zeros(1, VIDEO_CHANNELS, 1, r[1], r[2]))
            elif kind == "video":
                visual.append(torch.zeros(1, VIDEO_CHANNELS, r[1], r[2], r[3]))
            if kind == "audio":
                sound.append(torch.zeros(2 * r[1], AUDIO_CHANNELS))
            elif has_audio:
                sound.append(torch.zeros(2 * r[4], AUDIO_CHANNELS))
        (position_ids, token_tags, video_indices, audio_indices, text_indices, n_video,
         n_audio) = MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
            torch.tensor(tags), refs, visual, sound, frames, height, width, audio, PATCH, 2, 2, 0)
        for key, value in (("position_ids", position_ids.to(torch.float64)), ("token_tags", token_tags),
                           ("video_indices", video_indices), ("audio_indices", audio_indices),
                           ("text_indices", text_indices)):
            tensors[f"{name}/{key}"] = value.contiguous()
        cases[name] = {"text_tags": tags, "target": {"latent_frames": frames, "latent_height": height,
                                                     "latent_width": width, "audio_latents": audio},
                       "references": [list(r) for r in references],
                       "num_condition_video_rows": int(n_video), "num_condition_audio_rows": int(n_audio),
                       "length": int(position_ids.shape[0])}
        log(f"    layout/{name}: L {position_ids.shape[0]}, reference rows video {n_video} audio {n_audio}")
    save_tensors(root / "ref2va.safetensors", tensors)
    write_json(root / "cases.json", {"patch": list(PATCH), "cases": cases,
                                     "reference": "MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence"})
    return []
