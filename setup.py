# setuptools drives the same CMake build the Makefile runs; the built libraries land in torch_tpu/.
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def run(self):
        build = os.path.join(ROOT, "build")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja",
                               f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build])
        if not self.inplace:  # a wheel: copy the in-tree libraries next to the package
            dest = os.path.join(self.build_lib, "torch_tpu")
            os.makedirs(dest, exist_ok=True)
            for f in os.listdir(os.path.join(ROOT, "torch_tpu")):
                if f.endswith(".so"):
                    self.copy_file(os.path.join(ROOT, "torch_tpu", f), dest)


setup(ext_modules=[Extension("torch_tpu._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
