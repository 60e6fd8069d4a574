"""The MindSpore runtime of the test session (imported by tests/conftest.py and fixtures that need it)."""


def mindspore_on_cpu():
    """MindSpore on the CPU in PyNative mode, whichever test module started its runtime first."""
    import mindspore
    try:
        mindspore.set_device("CPU")
    except RuntimeError:  # a test module already ran kernels: the runtime keeps its device (CPU here)
        assert mindspore.get_context("device_target") == "CPU"
    mindspore.set_context(mode=mindspore.PYNATIVE_MODE)
    return mindspore
