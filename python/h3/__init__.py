"""h3: MiniMax-H3 text (+ pictures, clips, sounds) to a video with its soundtrack, on libh3's C API (h3/h3_c.h).

A thin ctypes binding: no PyTorch, no NumPy. Results are plain buffers (bytes of RGB24 frames, an array of float32
samples) or an MP4 on disk::

    import h3
    with h3.Engine("MiniMax-H3") as engine:
        result = engine.generate(prompt="A red fox walks through fresh snow.", seed=7,
                                 on_progress=lambda phase, done, total: print(phase, done, total))
        result.write_mp4("fox.mp4")

libh3 is found through $H3_LIBRARY (a path to libh3.so), else next to an installed copy of this package, else on
the loader's search path.
"""

import array
import ctypes
import ctypes.util
import os

__all__ = ["Engine", "Result", "Error", "InvalidRequest", "Cancelled", "version", "build_info"]


class Error(Exception):
    """A failed call: `status` is the C API's h3_status name, the message its sentence(s)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class InvalidRequest(Error):
    """The request breaks a rule (the message has one sentence per rule)."""


class Cancelled(Error):
    """Engine.cancel() (or an exception raised in a callback) stopped the generation."""


# h3_status values (h3/h3_c.h).
_OK, _INVALID_REQUEST, _CANCELLED = 0, 2, 4
_KEYFRAMES = {"first": 0, "last": 1}
_REFERENCE_KINDS = {"image": 0, "video": 1, "silent-video": 2, "video-audio": 3, "audio": 4}

_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
_FRAMES = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_int, ctypes.c_int)


class _Callbacks(ctypes.Structure):
    _fields_ = [("on_progress", _PROGRESS), ("on_frames", _FRAMES), ("user", ctypes.c_void_p)]


def _library_path():
    explicit = os.environ.get("H3_LIBRARY")
    if explicit:
        return explicit
    try:
        from . import _location  # written by cmake --install
        return os.path.normpath(os.path.join(os.path.dirname(__file__), _location.LIBRARY))
    except ImportError:
        found = ctypes.util.find_library("h3")
        if found:
            return found
    raise OSError("libh3 was not found: set H3_LIBRARY to the path of libh3.so, or install h3 "
                  "(cmake --install BUILD --prefix PREFIX) and use the package installed there.")


def _load():
    lib = ctypes.CDLL(_library_path())
    p, i64, u64, c_int, c_double = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_int, ctypes.c_double
    s = ctypes.c_char_p
    signatures = {
        "h3_status_name": (s, [c_int]),
        "h3_last_error": (s, []),
        "h3_version": (s, []),
        "h3_build_info": (s, []),
        "h3_phase_name": (s, [c_int]),
        "h3_engine_open": (c_int, [s, s, ctypes.POINTER(p)]),
        "h3_engine_free": (None, [p]),
        "h3_engine_description": (s, [p]),
        "h3_engine_cancel": (None, [p]),
        "h3_request_new": (p, []),
        "h3_request_free": (None, [p]),
        "h3_request_set_prompt": (c_int, [p, s]),
        "h3_request_set_seed": (c_int, [p, u64]),
        "h3_request_set_size": (c_int, [p, i64, i64]),
        "h3_request_set_frames": (c_int, [p, i64]),
        "h3_request_set_seconds": (c_int, [p, c_double]),
        "h3_request_set_steps": (c_int, [p, i64]),
        "h3_request_set_reuse": (c_int, [p, i64]),
        "h3_request_set_core_reuse": (c_int, [p, i64]),
        "h3_request_set_layers": (c_int, [p, i64]),
        "h3_request_set_token_reduction": (c_int, [p, c_int]),
        "h3_request_set_render_size": (c_int, [p, i64, i64]),
        "h3_request_set_use_reference_rope": (c_int, [p, c_int]),
        "h3_request_set_keyframe": (c_int, [p, c_int, s]),
        "h3_request_add_reference": (c_int, [p, c_int, s, s]),
        "h3_request_set_reference_image_size": (c_int, [p, c_int]),
        "h3_engine_validate": (c_int, [p, p, ctypes.POINTER(i64), ctypes.POINTER(i64), ctypes.POINTER(i64)]),
        "h3_engine_generate": (c_int, [p, p, ctypes.POINTER(_Callbacks), ctypes.POINTER(p)]),
        "h3_result_free": (None, [p]),
        "h3_result_width": (c_int, [p]),
        "h3_result_height": (c_int, [p]),
        "h3_result_frames": (i64, [p]),
        "h3_result_fps": (c_int, [p]),
        "h3_result_seed": (u64, [p]),
        "h3_result_video_rgb8": (ctypes.POINTER(ctypes.c_uint8), [p]),
        "h3_result_audio": (ctypes.POINTER(ctypes.c_float), [p]),
        "h3_result_audio_samples": (i64, [p]),
        "h3_result_sample_rate": (c_int, [p]),
        "h3_result_phase_seconds": (c_double, [p, c_int]),
        "h3_result_write_mp4": (c_int, [p, s]),
    }
    for name, (restype, argtypes) in signatures.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = restype, argtypes
    return lib


_lib = _load()


def _text(b):
    return b.decode("utf-8") if b is not None else None


def _check(status):
    if status == _OK:
        return
    message = _text(_lib.h3_last_error())
    name = _text(_lib.h3_status_name(status))
    kind = InvalidRequest if status == _INVALID_REQUEST else Cancelled if status == _CANCELLED else Error
    raise kind(name, message)


def _path(value):
    return os.fsencode(value)


def version():
    """libh3's version, e.g. "0.1.0"."""
    return _text(_lib.h3_version())


def build_info():
    """What `h3 --version` prints: version, commit, CUDA libraries, GPU architectures."""
    return _text(_lib.h3_build_info())


class Result:
    """One generated video: its frames as RGB24 bytes, its soundtrack as planar float32 samples."""

    def __init__(self, handle):
        self._handle = handle
        self.width = _lib.h3_result_width(handle)
        self.height = _lib.h3_result_height(handle)
        self.frames = _lib.h3_result_frames(handle)
        self.fps = _lib.h3_result_fps(handle)
        self.seed = _lib.h3_result_seed(handle)
        self.sample_rate = _lib.h3_result_sample_rate(handle)
        video_bytes = self.frames * self.height * self.width * 3
        #: frames * height * width * 3 bytes: RGB24, frame after frame, row-major.
        self.video_rgb8 = ctypes.string_at(_lib.h3_result_video_rgb8(handle), video_bytes)
        samples = _lib.h3_result_audio_samples(handle)
        #: The soundtrack cut to the video's length: the left channel's samples, then the right's.
        self.audio = array.array("f", ctypes.string_at(_lib.h3_result_audio(handle), 2 * samples * 4))
        #: Wall seconds per phase that ran ("load", "prompt", "denoise", "video decode", "audio decode", ...).
        self.timings = {}
        for phase in range(8):
            seconds = _lib.h3_result_phase_seconds(handle, phase)
            if seconds > 0:
                self.timings[_text(_lib.h3_phase_name(phase))] = seconds

    def frame(self, index):
        """Frame `index` as RGB24 bytes (height * width * 3)."""
        if not 0 <= index < self.frames:
            raise IndexError(f"frame {index} is not in 0..{self.frames - 1}")
        size = self.height * self.width * 3
        return self.video_rgb8[index * size:(index + 1) * size]

    def write_mp4(self, path):
        """The MP4 (H.264 + AAC, the settings in its metadata), written whole or not at all."""
        if self._handle is None:
            raise Error("invalid argument", "the result was closed")
        _check(_lib.h3_result_write_mp4(self._handle, _path(path)))

    def close(self):
        """Frees the C result (the buffers above stay)."""
        if self._handle is not None and _lib is not None:
            _lib.h3_result_free(self._handle)
        self._handle = None

    def __del__(self):
        self.close()


class Engine:
    """A loaded MiniMax-H3 snapshot: components load on first use and stay; prompt encodings are cached."""

    def __init__(self, model_dir, device="auto"):
        self._handle = None
        handle = ctypes.c_void_p()
        _check(_lib.h3_engine_open(_path(model_dir), device.encode(), ctypes.byref(handle)))
        self._handle = handle

    @property
    def description(self):
        """The backend and device, e.g. "cpu backend (...)"."""
        return _text(_lib.h3_engine_description(self._handle))

    def _request(self, prompt, seed, width, height, frames, seconds, steps, first_frame, last_frame, references,
                 reference_image_size, reuse, core_reuse, layers, token_reduction, render_width, render_height,
                 use_reference_rope):
        r = _lib.h3_request_new()
        if not r:
            raise MemoryError("h3_request_new")
        try:
            _check(_lib.h3_request_set_prompt(r, prompt.encode("utf-8")))
            if seed is not None:
                _check(_lib.h3_request_set_seed(r, seed))
            if (width is None) != (height is None):
                raise InvalidRequest("invalid request", "Give width and height together, or neither.")
            if width is not None:
                _check(_lib.h3_request_set_size(r, width, height))
            if frames is not None:
                _check(_lib.h3_request_set_frames(r, frames))
            if seconds is not None:
                _check(_lib.h3_request_set_seconds(r, seconds))
            if steps is not None:
                _check(_lib.h3_request_set_steps(r, steps))
            # The speed controls: the C API stores them and the request's rules check them (one side of the render
            # canvas alone included), so their errors are h3's own sentences.
            if reuse is not None:
                _check(_lib.h3_request_set_reuse(r, reuse))
            if core_reuse is not None:
                _check(_lib.h3_request_set_core_reuse(r, core_reuse))
            if layers is not None:
                _check(_lib.h3_request_set_layers(r, layers))
            if render_width is not None or render_height is not None:
                _check(_lib.h3_request_set_render_size(r, render_width or 0, render_height or 0))
            _check(_lib.h3_request_set_token_reduction(r, 1 if token_reduction else 0))
            _check(_lib.h3_request_set_use_reference_rope(r, 1 if use_reference_rope else 0))
            for which, path in (("first", first_frame), ("last", last_frame)):
                if path is not None:
                    _check(_lib.h3_request_set_keyframe(r, _KEYFRAMES[which], _path(path)))
            for ref in references:
                kind, *files = ref
                if kind not in _REFERENCE_KINDS:
                    raise Error("invalid argument", f"a reference is one of {', '.join(_REFERENCE_KINDS)}, got "
                                                    f"{kind!r}")
                soundtrack = _path(files[1]) if kind == "video-audio" and len(files) > 1 else None
                _check(_lib.h3_request_add_reference(r, _REFERENCE_KINDS[kind], _path(files[0]), soundtrack))
            if reference_image_size not in ("max", "match"):
                raise Error("invalid argument", f"reference_image_size is max or match, got {reference_image_size!r}")
            _check(_lib.h3_request_set_reference_image_size(r, reference_image_size == "match"))
            return r
        except BaseException:
            _lib.h3_request_free(r)
            raise

    def validate(self, prompt, **settings):
        """Checks every rule before any weight loads; returns {"width", "height", "frames"} the request generates."""
        r = self._request(prompt, **_settings(settings))
        try:
            w, h, f = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
            _check(_lib.h3_engine_validate(self._handle, r, ctypes.byref(w), ctypes.byref(h), ctypes.byref(f)))
            return {"width": w.value, "height": h.value, "frames": f.value}
        finally:
            _lib.h3_request_free(r)

    def generate(self, prompt, on_progress=None, on_frames=None, output=None, **settings):
        """Generates one video.

        settings: seed, width, height, frames or seconds, steps, first_frame / last_frame (image files), references
        (a list of ("image", path), ("video", path), ("silent-video", path), ("video-audio", video, audio),
        ("audio", path), in the prompt's order), reference_image_size ("max" or "match"); the speed controls (off by
        default: the exact path) reuse (1..3), core_reuse (1..6), layers (None: all), token_reduction (bool),
        render_width and render_height (together; None: the output canvas), use_reference_rope (bool).
        on_progress(phase, done, total): phase is "load", "prompt", "denoise", ...
        on_frames(rgb, first_frame, count, width, height): decoded frames as they are ready (RGB24 bytes).
        output: also write the MP4 there. An exception raised in a callback cancels the generation and is raised
        again here.
        """
        r = self._request(prompt, **_settings(settings))
        raised = []

        def guard(f):
            def call(*args):
                if raised:
                    return
                try:
                    f(*args)
                except BaseException as e:  # re-raised once the C call returns
                    raised.append(e)
                    _lib.h3_engine_cancel(self._handle)
            return call

        progress = _PROGRESS(guard(lambda user, phase, done, total:
                                   on_progress(_text(_lib.h3_phase_name(phase)), done, total))) if on_progress \
            else _PROGRESS()
        frames = _FRAMES(guard(lambda user, rgb, first, count, width, height:
                               on_frames(ctypes.string_at(rgb, count * height * width * 3), first, count, width,
                                         height))) if on_frames else _FRAMES()
        callbacks = _Callbacks(progress, frames, None)
        handle = ctypes.c_void_p()
        try:
            status = _lib.h3_engine_generate(self._handle, r, ctypes.byref(callbacks), ctypes.byref(handle))
        finally:
            _lib.h3_request_free(r)
        if raised:
            if handle:
                _lib.h3_result_free(handle)
            raise raised[0]
        _check(status)
        result = Result(handle)
        if output is not None:
            result.write_mp4(output)
        return result

    def cancel(self):
        """Stops the running generation after its current step (generate raises Cancelled); from any thread."""
        if self._handle:
            _lib.h3_engine_cancel(self._handle)

    def close(self):
        """Frees the engine (its loaded components); it cannot be used afterwards."""
        if self._handle and _lib is not None:
            _lib.h3_engine_free(self._handle)
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


_SETTINGS = ("seed", "width", "height", "frames", "seconds", "steps", "first_frame", "last_frame", "references",
             "reference_image_size", "reuse", "core_reuse", "layers", "token_reduction", "render_width",
             "render_height", "use_reference_rope")


def _settings(given):
    unknown = set(given) - set(_SETTINGS)
    if unknown:
        raise TypeError(f"unknown setting(s) {', '.join(sorted(unknown))}; the settings are {', '.join(_SETTINGS)}")
    out = {name: None for name in _SETTINGS}
    out["references"] = ()
    out["reference_image_size"] = "max"
    out.update(given)
    return out
