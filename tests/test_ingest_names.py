"""Display-name normalisation shared by the NVIDIA readers (perfcheck.ingest.names)."""

from __future__ import annotations

import pandas as pd

from perfcheck.ingest.names import gnu_style, gnu_style_one

# Names as Nsight Systems 2025.1 wrote them in ../shared/profiles/nsys/nvidia-fuser-h200-nsys2025.1
# (StringIds, demangledName), and what the GNU demangler (Kineto) writes for the same spelling.
NSYS_FILL = "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, std::array<char *, (unsigned long)1>>(int, T2, T3)"
GNU_FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul>>(int, T2, T3)"
NSYS_NVFUSER = "<unnamed>::nvfuser_pointwise_f0_c1_r0_g0(<unnamed>::Tensor<float, (int)2, (int)2>, <unnamed>::Tensor<float, (int)2, (int)2>)"
GNU_NVFUSER = "(anonymous namespace)::nvfuser_pointwise_f0_c1_r0_g0((anonymous namespace)::Tensor<float, 2, 2>, (anonymous namespace)::Tensor<float, 2, 2>)"
NSYS_LAMBDA = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const"
GNU_LAMBDA = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const"


def test_nvidia_spellings_become_gnu():
    assert gnu_style_one(NSYS_FILL) == GNU_FILL
    assert gnu_style_one(NSYS_NVFUSER) == GNU_NVFUSER
    assert gnu_style_one(NSYS_LAMBDA) == GNU_LAMBDA
    # nvprof: "type=value" template arguments (leimingyu-magus matrixMul trace)
    assert gnu_style_one("void matrixMulCUDA<int=32>(float*, float*, float*, int, int)") == \
        "void matrixMulCUDA<32>(float*, float*, float*, int, int)"
    # ncu (gardenia gemm.csv): "T1 *"
    assert gnu_style_one("void gemm_v0<float>(T1 *, T1 *, T1 *, int, int, int)") == \
        "void gemm_v0<float>(T1*, T1*, T1*, int, int, int)"
    # 2023 Kineto (GNU demangler of the time) closes nested templates "> >"
    assert gnu_style_one("void k<4, at::detail::Array<char*, 1> >(int)") == "void k<4, at::detail::Array<char*, 1>>(int)"
    assert gnu_style_one("k<(bool)1, (unsigned int)7, (long long)-2, (char)65>") == "k<true, 7u, -2ll, (char)65>"


def test_gnu_names_are_left_alone():
    for name in ("softmax_kernel", "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", GNU_FILL, GNU_NVFUSER, GNU_LAMBDA,
                 "void fft2d_r2c_32x32<float, false, 5u, true>(float2*, float const*, int)"):
        assert gnu_style_one(name) == name


def test_series_and_categorical():
    plain = gnu_style(pd.Series([NSYS_FILL, NSYS_FILL, None, "k"], dtype="string"))
    assert plain.tolist()[:2] == [GNU_FILL, GNU_FILL] and plain.isna().tolist() == [False, False, True, False]
    cat = gnu_style(pd.Series([NSYS_FILL, "k", NSYS_FILL], dtype="category"))
    assert isinstance(cat.dtype, pd.CategoricalDtype) and cat.tolist() == [GNU_FILL, "k", GNU_FILL]
    # two spellings of one kernel merge
    merged = gnu_style(pd.Series([NSYS_FILL, GNU_FILL], dtype="category"))
    assert merged.nunique() == 1
