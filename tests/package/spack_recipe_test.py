"""The Spack package (packaging/spack) against this tree, without Spack itself.

Spack cannot be installed on the test machines (it is no PyPI package, and CI reaches only
the package registries), so this test loads the recipe with stand-ins for Spack's directives
and build-system classes, then checks what the recipe would hand CMake:

1. every variable its cmake_args() defines, for every variant set, is one CMakeLists declares
   (a renamed option would otherwise be dropped silently by CMake);
2. CMake configures this tree with those arguments, Debian's libraries standing in for Spack's
   prefixes, and uses every one of them;
3. a variant that asks for a feature whose library is missing fails the configure, naming the
   variable (+onednn must never build a crest without oneDNN).

Usage: spack_recipe_test.py SOURCE_DIR [PYTHON]   (PYTHON: one with nanobind, for +python)
"""

import contextlib
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import types

SOURCE = pathlib.Path(sys.argv[1]).resolve()
PYTHON = sys.argv[2] if len(sys.argv) > 2 else ""
RECIPE = SOURCE / "packaging/spack/spack_repo/crest/packages/crest/package.py"
PLATLIB = "lib/python3.11/site-packages"  # what Spack's python package's platlib reads like

# Variables CMake or its Find modules read, which the tree need not declare itself.
CMAKE_OWN = {"CMAKE_CUDA_ARCHITECTURES", "CMAKE_CUDA_COMPILER", "CUDAToolkit_ROOT"}


class Directives:
    """What the recipe's class body declared, in order, with the `when` it sat under."""

    def __init__(self):
        self.calls = []
        self.when = []

    def record(self, kind, *args, **kwargs):
        when = " ".join(self.when + ([kwargs["when"]] if "when" in kwargs else []))
        self.calls.append((kind, args, when))

    def named(self, kind):
        return [(args, when) for k, args, when in self.calls if k == kind]


DECLARED = Directives()


def spack_package_module():
    """spack.package: the directives record themselves; decorators pass methods through."""
    module = types.ModuleType("spack.package")

    def directive(kind):
        return lambda *args, **kwargs: DECLARED.record(kind, *args, **kwargs)

    for kind in ("version", "variant", "depends_on", "conflicts", "extends", "license",
                 "maintainers", "requires"):
        setattr(module, kind, directive(kind))

    @contextlib.contextmanager
    def when(condition):
        DECLARED.when.append(condition)
        yield
        DECLARED.when.pop()

    module.when = when
    module.run_after = lambda *phases: (lambda method: method)
    module.on_package_attributes = lambda **attributes: (lambda method: method)
    module.join_path = os.path.join
    module.Executable = lambda path: (lambda *args: None)
    module.__all__ = [name for name in vars(module) if not name.startswith("_")]
    return module


def define(name, value):
    """Spack's CMakePackage.define: booleans as ON/OFF, sequences joined with ';'."""
    if isinstance(value, bool):
        return f"-D{name}:BOOL={'ON' if value else 'OFF'}"
    if isinstance(value, (list, tuple)):
        value = ";".join(str(v) for v in value)
    return f"-D{name}:STRING={value}"


class CMakePackage:
    def __init__(self, spec, run_tests=False):
        self.spec = spec
        self.run_tests = run_tests
        self.prefix = Prefix("/opt/spack/crest")

    def define(self, name, value):
        return define(name, value)

    def define_from_variant(self, name, variant):
        return define(name, self.spec.variants[variant])


class CudaPackage:
    DECLARED.record("variant", "cuda")
    DECLARED.record("variant", "cuda_arch", when="+cuda")


def install_spack_stand_ins():
    cmake = types.ModuleType("spack_repo.builtin.build_systems.cmake")
    cmake.CMakePackage = CMakePackage
    cuda = types.ModuleType("spack_repo.builtin.build_systems.cuda")
    cuda.CudaPackage = CudaPackage
    modules = {"spack": types.ModuleType("spack"), "spack.package": spack_package_module(),
               "spack_repo": types.ModuleType("spack_repo"),
               "spack_repo.builtin": types.ModuleType("spack_repo.builtin"),
               "spack_repo.builtin.build_systems":
                   types.ModuleType("spack_repo.builtin.build_systems"),
               "spack_repo.builtin.build_systems.cmake": cmake,
               "spack_repo.builtin.build_systems.cuda": cuda}
    sys.modules.update(modules)


class Prefix(str):
    """A Spack prefix: attributes are path components (prefix.bin.nvcc)."""

    def __getattr__(self, name):
        return Prefix(os.path.join(self, name))


class Spec:
    """The parts of a concrete spec the recipe reads."""

    def __init__(self, python_command, **variants):
        self.variants = {"onednn": True, "onnx": True, "python": False, "cuda": False,
                         "cuda_arch": ("none",)} | variants
        self.dependencies = {
            "cuda": types.SimpleNamespace(prefix=Prefix("/usr/local/cuda")),
            "python": types.SimpleNamespace(command=types.SimpleNamespace(path=python_command),
                                            package=types.SimpleNamespace(platlib=PLATLIB))}

    def satisfies(self, condition):
        match = re.fullmatch(r"([+~])(\w+)|(\w+)=(\w+)", condition)
        if match is None:
            raise AssertionError(f"the stand-in spec cannot judge {condition!r}")
        if match[1]:
            return self.variants[match[2]] == (match[1] == "+")
        return match[4] in self.variants[match[3]]

    def __getitem__(self, name):
        return self.dependencies[name]


def load_recipe():
    install_spack_stand_ins()
    spec = importlib.util.spec_from_file_location("crest_spack_recipe", RECIPE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Crest, module


def cache_variables_declared():
    """Names CMakeLists and cmake/ declare: option(), crest_feature(), set(... CACHE ...)."""
    names = set()
    for path in [SOURCE / "CMakeLists.txt", SOURCE / "python/CMakeLists.txt",
                 *(SOURCE / "cmake").glob("*.cmake")]:
        text = path.read_text()
        names |= set(re.findall(r"\b(?:option|crest_feature)\(\s*(\w+)", text))
        names |= {m[0] for m in re.findall(r"\bset\(\s*(\w+)\s+((?:[^()]|\([^()]*\))*?)\bCACHE\b",
                                           text)}
    return names


def variant_sets():
    """The variant sets a user would build: the default, each variant flipped, CUDA."""
    sets = {"default": {}, "~onednn~onnx": {"onednn": False, "onnx": False},
            "+cuda": {"cuda": True, "cuda_arch": ("90",)}}
    if PYTHON:
        sets["+python"] = {"python": True}
    return sets


def configure(args, build_dir, extra=()):
    """CMake on this tree with the recipe's arguments; Debian's libraries, and oneDNN from
    scripts/install-onednn.sh, stand in for the prefixes Spack would put on CMAKE_PREFIX_PATH."""
    command = ["cmake", "-S", str(SOURCE), "-B", str(build_dir),
               f"-DCMAKE_PREFIX_PATH={SOURCE / '.deps/onednn'}", *args, *extra]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def check_directives(module):
    variants = {args[0] for args, _ in DECLARED.named("variant")}
    assert {"onednn", "onnx", "python", "cuda"} <= variants, variants
    needs = {(args[0].split()[0].split("@")[0], when) for args, when in DECLARED.named("depends_on")}
    for dependency, when in [("onednn", "+onednn"), ("onnx", "+onnx"), ("cudnn", "+cuda"),
                             ("py-nanobind", "+python"), ("mpi", ""), ("hdf5", "")]:
        assert (dependency, when) in needs, f"the recipe does not depend on {dependency} {when}"
    assert pathlib.Path(module.CHECKOUT).resolve() == SOURCE, module.CHECKOUT
    assert module.Crest.git == f"file://{SOURCE}", module.Crest.git


def check_variant_set(recipe, name, variants, declared, tmp):
    cuda_here = os.path.exists("/usr/local/cuda/bin/nvcc")
    if variants.get("cuda") and not cuda_here:
        print(f"{name}: no CUDA toolkit in /usr/local/cuda: its configure is skipped")
        return
    args = recipe(Spec(PYTHON or "/usr/bin/python3", **variants)).cmake_args()
    defined = {re.match(r"-D(\w+)", arg)[1] for arg in args}
    unknown = defined - declared - CMAKE_OWN
    assert not unknown, f"{name}: the recipe defines {sorted(unknown)}, which CMake never reads"
    # What Spack's python package adds for a dependent (its dependent_cmake_args).
    hints = [f"-DPython_EXECUTABLE:PATH={PYTHON}"] if variants.get("python") else []
    result = configure(args, tmp / name, hints)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{name}: configure failed:\n{output[-3000:]}"
    assert "Manually-specified variables were not used" not in output, f"{name}:\n{output}"
    print(f"{name}: {len(args)} arguments, configured")


def check_missing_library_fails(recipe, tmp):
    args = recipe(Spec("/usr/bin/python3")).cmake_args()
    result = configure(args, tmp / "no-onednn", ["-DCMAKE_DISABLE_FIND_PACKAGE_dnnl=ON"])
    output = result.stdout + result.stderr
    assert result.returncode != 0, "+onednn configured without oneDNN"
    assert "CREST_WITH_ONEDNN=ON but oneDNN >= 3.2 was not found" in output, output[-3000:]
    print("+onednn without oneDNN: configure fails, naming CREST_WITH_ONEDNN")


def main():
    if shutil.which("cmake") is None:
        print("cmake is not installed: skipped")
        return 77
    recipe, module = load_recipe()
    check_directives(module)
    declared = cache_variables_declared()
    with tempfile.TemporaryDirectory() as tmp:
        for name, variants in variant_sets().items():
            check_variant_set(recipe, name, variants, declared, pathlib.Path(tmp))
        check_missing_library_fails(recipe, pathlib.Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
