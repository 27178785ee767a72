# crest's Spack package, kept in crest's tree (docs/deployment.md, "Spack"). It builds the
# checkout it sits in: `spack install crest@main` clones that checkout's main branch, and
# `spack develop` builds the working tree itself.
import pathlib

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *

# packaging/spack/spack_repo/crest/packages/crest/package.py -> the checkout's root
CHECKOUT = pathlib.Path(__file__).resolve().parents[6]


class Crest(CMakePackage, CudaPackage):
    """Deep learning on scientific data at supercomputer scale: trains CosmoFlow and DeepCAM
    with MPI, feeds the data fast, measures FLOP/s, I/O and communication against the
    hardware's limits, searches hyperparameters and runs inference."""

    git = f"file://{CHECKOUT}"

    license("Apache-2.0")

    version("main", branch="main")

    variant("onednn", default=True, description="oneDNN CPU backend (else only the slow reference)")
    variant("onnx", default=True, description="crest export --format onnx")
    variant("python", default=False, description="the Python module crest (nanobind)")

    depends_on("c", type="build")  # CMake's FindHDF5 probes with the C compiler
    depends_on("cxx", type="build")
    depends_on("cmake@3.25:", type="build")
    # C++20 as GCC 12 and clang 14 implement it; older compilers are not tried.
    conflicts("%gcc@:11", msg="crest needs GCC 12 or newer (C++20)")
    conflicts("%clang@:13", msg="crest needs clang 14 or newer (C++20)")

    depends_on("mpi")
    depends_on("hdf5")  # the C API; serial or parallel, crest reads files in its own process
    depends_on("yaml-cpp")
    depends_on("nlohmann-json@3:")
    depends_on("cli11")
    depends_on("zlib-api")
    depends_on("libjpeg-turbo")  # the TurboJPEG API (libturbojpeg.pc): JPEG image datasets
    # The backend speaks oneDNN's 3.x API with OpenMP threads (crest's own loops use OpenMP).
    depends_on("onednn@3.2: cpu_runtime=omp", when="+onednn")
    with when("+onnx"):
        depends_on("onnx")
        depends_on("protobuf")
    # Built and run with CUDA 13.0 and cuDNN 9 (docs/cuda.md); earlier toolkits are not tried.
    with when("+cuda"):
        depends_on("cuda@13:")
        depends_on("cudnn@9:")
    with when("+python"):
        extends("python")
        depends_on("python@3.9:", type=("build", "link", "run"))
        depends_on("py-nanobind@2:", type="build")
        depends_on("py-numpy", type=("build", "run"))

    def cmake_args(self):
        spec = self.spec
        args = [
            # A site's compiler may warn where GCC 12 does not: warnings stay warnings here.
            self.define("CREST_WERROR", False),
            # -march=native would tie the install to the build node's CPU generation.
            self.define("CREST_NATIVE", False),
            # The suite needs the checkout's Python venv (tests/interop) and ../shared: it is
            # `make test`'s; an install is checked by check_installed_binary instead.
            self.define("CREST_BUILD_TESTS", False),
            # ON, not AUTO: a variant that asks for a feature fails the build when the
            # feature's library is not found, instead of leaving the feature out.
            self.define_from_variant("CREST_WITH_ONEDNN", "onednn"),
            self.define_from_variant("CREST_WITH_ONNX", "onnx"),
            self.define_from_variant("CREST_WITH_CUDA", "cuda"),
            self.define_from_variant("CREST_PYTHON_MODULE", "python"),
        ]
        if spec.satisfies("+cuda"):
            args.append(self.define("CUDAToolkit_ROOT", spec["cuda"].prefix))
            args.append(self.define("CMAKE_CUDA_COMPILER", spec["cuda"].prefix.bin.nvcc))
            if not spec.satisfies("cuda_arch=none"):
                args.append(self.define_from_variant("CMAKE_CUDA_ARCHITECTURES", "cuda_arch"))
        if spec.satisfies("+python"):
            # Python_EXECUTABLE comes from Spack's python package (its dependent_cmake_args).
            args.append(self.define("CREST_PYTHON_INSTALL_DIR", self.python_package_dir()))
        return args

    def python_package_dir(self):
        """<prefix>/lib/pythonX.Y/site-packages: where the package `crest` goes."""
        return join_path(self.prefix, self.spec["python"].package.platlib)

    def setup_run_environment(self, env):
        # DeepCAM's HDF5 files are read by a `crest __hdf5-reader` process (docs/security.md):
        # a program linking libcrest, or Python, must be told where the binary is.
        env.set("CREST_HDF5_READER", self.prefix.bin.crest)
        if self.spec.satisfies("+python"):
            env.prepend_path("PYTHONPATH", self.python_package_dir())

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_installed_binary(self):
        """The installed binary starts, and trains one step of the demo on built-in data."""
        crest = Executable(self.prefix.bin.crest)
        crest("--version")
        demo = join_path(self.stage.source_path, "configs", "cosmoflow-demo.yaml")
        crest("train", "--config", demo, "data.n_train=4", "data.n_valid=0", "data.n_epochs=1",
              f"output_dir={join_path(self.stage.path, 'demo-run')}", "--overwrite")
