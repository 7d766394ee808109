"""The installed Python binding (python/h3) on the tiny model: buffers, callbacks, errors, cancellation, the speed
controls.

    test_python.py TINY_MODEL_DIR H3_BINARY   (with the installed package on PYTHONPATH; run by
                                              tests/install/check.sh with the installed bin/h3)
"""
import os
import re
import subprocess
import sys
import tempfile
import threading
import unittest

import h3

MODEL = sys.argv.pop(1)
H3_BINARY = sys.argv.pop(1)
SMALL = dict(width=64, height=64, frames=5, steps=2)


class Binding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = h3.Engine(MODEL, device="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.engine.close()

    def test_version(self):
        self.assertRegex(h3.version(), r"^\d+\.\d+\.\d+$")
        self.assertTrue(h3.build_info().startswith(f"h3 {h3.version()} (commit "), h3.build_info())
        self.assertIn("cpu backend", self.engine.description)

    def test_a_missing_model_is_an_error_naming_it(self):
        with self.assertRaises(h3.Error) as e:
            h3.Engine("/nonexistent-h3-model")
        self.assertEqual(e.exception.status, "model")
        self.assertIn("/nonexistent-h3-model", str(e.exception))

    def test_every_broken_rule_is_one_sentence(self):
        with self.assertRaises(h3.InvalidRequest) as e:
            self.engine.validate("a fox", width=500, height=64, steps=1)
        lines = str(e.exception).split("\n")
        self.assertEqual(len(lines), 2, lines)
        self.assertTrue(lines[0].startswith("The width must be a multiple of"), lines)
        self.assertTrue(lines[1].startswith("--steps (model passes) must be between 2 and 1000, got 1"), lines)
        self.assertEqual(self.engine.validate("a fox", **SMALL), {"width": 64, "height": 64, "frames": 5})
        # 6 frames are rounded up to the next 17n + 5.
        self.assertEqual(self.engine.validate("a fox", width=64, height=64, frames=6)["frames"], 22)
        with self.assertRaises(TypeError):
            self.engine.validate("a fox", sped=2)

    def test_buffers_callbacks_and_the_mp4(self):
        events, chunks = [], []
        r = self.engine.generate("a red fox", seed=3, on_progress=lambda *e: events.append(e),
                                 on_frames=lambda rgb, first, count, w, h: chunks.append((first, count, w, h, rgb)),
                                 **SMALL)
        self.assertEqual((r.width, r.height, r.frames, r.fps, r.seed, r.sample_rate), (64, 64, 5, 24, 3, 32000))
        self.assertEqual(len(r.video_rgb8), 5 * 64 * 64 * 3)
        self.assertEqual(len(r.frame(4)), 64 * 64 * 3)
        # Stereo, cut to the video's length when longer (the tiny model's soundtrack is shorter than 5 frames).
        self.assertEqual(len(r.audio) % 2, 0)
        self.assertTrue(0 < len(r.audio) // 2 <= round(5 * 32000 / 24), len(r.audio))
        self.assertTrue(all(-1.0 <= s <= 1.0 for s in r.audio))
        self.assertIn(("denoise", 0, 2), events)
        self.assertIn(("denoise", 2, 2), events)
        self.assertEqual({e[0] for e in events} - {"load"}, {"prompt", "denoise", "video decode", "audio decode"})
        # The frames callback delivers the result's bytes, in order, as they are decoded.
        self.assertEqual(sum(c[1] for c in chunks), 5)
        self.assertEqual([c[0] for c in chunks], sorted(c[0] for c in chunks))
        self.assertEqual(b"".join(c[4] for c in chunks), r.video_rgb8)
        self.assertGreater(r.timings["denoise"], 0)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "fox.mp4")
            r.write_mp4(path)
            with open(path, "rb") as f:
                self.assertEqual(f.read(12)[4:8], b"ftyp")
            with self.assertRaises(h3.Error) as e:
                r.write_mp4(os.path.join(d, "no-such-folder", "fox.mp4"))
            self.assertEqual(e.exception.status, "i/o")

    def test_the_seed_decides_the_video(self):
        a = self.engine.generate("a kite", seed=11, **SMALL)
        b = self.engine.generate("a kite", seed=11, **SMALL)
        c = self.engine.generate("a kite", seed=12, **SMALL)
        self.assertEqual(a.video_rgb8, b.video_rgb8)
        self.assertEqual(a.audio, b.audio)
        self.assertNotEqual(a.video_rgb8, c.video_rgb8)

    def test_cancel_from_a_callback_and_from_another_thread(self):
        def cancel_after_first_pass(phase, done, total):
            if phase == "denoise" and done == 1:
                self.engine.cancel()
        with self.assertRaises(h3.Cancelled) as e:
            self.engine.generate("a storm", on_progress=cancel_after_first_pass, **SMALL)
        self.assertEqual(e.exception.status, "cancelled")
        started = threading.Event()
        def wait_then_cancel():
            started.wait()
            self.engine.cancel()
        t = threading.Thread(target=wait_then_cancel)
        t.start()
        def block_until_cancelled(phase, done, total):
            if phase == "denoise" and done == 1:
                started.set()
                t.join()  # the other thread has cancelled before the next pass
        with self.assertRaises(h3.Cancelled):
            self.engine.generate("a storm", on_progress=block_until_cancelled, **SMALL)
        # The engine goes on.
        self.assertEqual(self.engine.generate("a storm", **SMALL).frames, 5)

    def test_an_exception_in_a_callback_stops_the_generation_and_is_raised(self):
        def boom(phase, done, total):
            if phase == "denoise":
                raise ValueError("stop here")
        with self.assertRaisesRegex(ValueError, "stop here"):
            self.engine.generate("a storm", on_progress=boom, **SMALL)

    def test_speed_control_errors_are_the_requests_own_sentences(self):
        # Each broken rule as the binding says it and as `h3` says it for the same flags: one sentence, one place.
        cases = [(dict(reuse=4), ["--reuse", "4"]),
                 (dict(core_reuse=7), ["--core-reuse", "7"]),
                 (dict(reuse=2, core_reuse=2), ["--reuse", "2", "--core-reuse", "2"]),
                 (dict(layers=1), ["--layers", "1"]),
                 (dict(render_width=32), ["--render-width", "32"]),
                 (dict(render_width=128, render_height=128), ["--render-width", "128", "--render-height", "128"])]
        for settings, flags in cases:
            with self.assertRaises(h3.InvalidRequest) as e:
                self.engine.validate("a fox", **SMALL, **settings)
            cli = subprocess.run([H3_BINARY, "-d", MODEL, "--device", "cpu", "-p", "a fox", "--width", "64",
                                  "--height", "64", "--frames", "5", "--steps", "2", "-o", "never.mp4"] + flags,
                                 capture_output=True, text=True)
            self.assertEqual(cli.returncode, 2, cli.stderr)
            self.assertEqual(f"h3: {e.exception}\n", cli.stderr, settings)
            self.assertNotIn("\n", str(e.exception), settings)
        self.assertFalse(os.path.exists("never.mp4"))

    def test_speed_controls_reach_the_video_and_its_metadata(self):
        exact = self.engine.generate("a red fox", **dict(SMALL, steps=4))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "fast.mp4")
            fast = self.engine.generate("a red fox", output=path, reuse=2, layers=2, token_reduction=True,
                                        render_width=32, render_height=32, use_reference_rope=True,
                                        **dict(SMALL, steps=4))
            probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format_tags", "-of",
                                    "default=noprint_wrappers=1", path], capture_output=True, text=True, check=True)
        tags = dict(line[len("TAG:"):].split("=", 1) for line in probe.stdout.splitlines())
        self.assertEqual((fast.width, fast.height), (64, 64))  # upscaled from the render canvas
        self.assertNotEqual(fast.video_rgb8, exact.video_rgb8)
        for key, value in (("h3_reuse", "2"), ("h3_layers", "2"), ("h3_token_reduction", "on"),
                           ("h3_render_canvas", "32x32"), ("h3_use_reference_rope", "on")):
            self.assertEqual(tags.get(key), value, tags)
        self.assertNotIn("h3_core_reuse", tags)


if __name__ == "__main__":
    unittest.main(verbosity=1)
