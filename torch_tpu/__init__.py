"""torch_tpu: a PyTorch device backend that runs ATen ops through OpenXLA PJRT plugins."""
__version__ = "0.1.0"


def _autoload():
    """Entry point for torch.backends autoloading (torch registers the device from here)."""
