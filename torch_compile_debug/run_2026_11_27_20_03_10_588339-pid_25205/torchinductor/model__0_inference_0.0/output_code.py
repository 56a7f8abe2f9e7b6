# AOT ID: ['0_inference']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p


cpp_fused_mv_relu_sin_view_0 = async_compile.cpp_pybinding(['const at::Half*', 'const at::Half*', 'const int32_t*', 'at::Half*', 'at::Half*', 'int32_t*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const at::Half* in_ptr0,
                       const at::Half* in_ptr1,
                       const int32_t* in_ptr2,
                       at::Half* out_ptr0,
                       at::Half* out_ptr1,
                       int32_t* out_ptr2)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(36L); x0+=static_cast<int64_t>(1L))
        {
            {
                {
                    auto tmp0 = in_ptr0[static_cast<int64_t>(5L*x0)];
                    auto tmp2 = in_ptr1[static_cast<int64_t>(0L)];
                    auto tmp5 = in_ptr0[static_cast<int64_t>(1L + 5L*x0)];
                    auto tmp7 = in_ptr1[static_cast<int64_t>(1L)];
                    auto tmp11 = in_ptr0[static_cast<int64_t>(2L + 5L*x0)];
                    auto tmp13 = in_ptr1[static_cast<int64_t>(2L)];
                    auto tmp17 = in_ptr0[static_cast<int64_t>(3L + 5L*x0)];
                    auto tmp19 = in_ptr1[static_cast<int64_t>(3L)];
                    auto tmp23 = in_ptr0[static_cast<int64_t>(4L + 5L*x0)];
                    auto tmp25 = in_ptr1[static_cast<int64_t>(4L)];
                    auto tmp1 = c10::convert<float>(tmp0);
                    auto tmp3 = c10::convert<float>(tmp2);
                    auto tmp4 = float(tmp1 * tmp3);
                    auto tmp6 = c10::convert<float>(tmp5);
                    auto tmp8 = c10::convert<float>(tmp7);
                    auto tmp9 = float(tmp6 * tmp8);
                    auto tmp10 = float(tmp4 + tmp9);
                    auto tmp12 = c10::convert<float>(tmp11);
                    auto tmp14 = c10::convert<float>(tmp13);
                    auto tmp15 = float(tmp12 * tmp14);
                    auto tmp16 = float(tmp10 + tmp15);
                    auto tmp18 = c10::convert<float>(tmp17);
                    auto tmp20 = c10::convert<float>(tmp19);
                    auto tmp21 = float(tmp18 * tmp20);
                    auto tmp22 = float(tmp16 + tmp21);
                    auto tmp24 = c10::convert<float>(tmp23);
                    auto tmp26 = c10::convert<float>(tmp25);
                    auto tmp27 = float(tmp24 * tmp26);
                    auto tmp28 = float(tmp22 + tmp27);
                    auto tmp29 = c10::convert<at::Half>(tmp28);
                    out_ptr0[static_cast<int64_t>(x0)] = tmp29;
                }
            }
        }
    }
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(180L); x0+=static_cast<int64_t>(32L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(160L)))
                {
                    auto tmp0 = at::vec::Vectorized<at::Half>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(32));
                    auto tmp1 = (tmp0);
                    auto tmp2 = at::vec::convert<float,2,at::Half,1>(tmp1);
                    auto tmp3 = tmp2.sin();
                    auto tmp4 = at::vec::convert<at::Half,1,float,2>(tmp3);
                    tmp4.store(out_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(32));
                }
                if(C10_UNLIKELY(x0 >= static_cast<int64_t>(160L) && x0 < static_cast<int64_t>(180L)))
                {
                    auto tmp0 = at::vec::Vectorized<at::Half>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(20L));
                    auto tmp1 = (tmp0);
                    auto tmp2 = at::vec::convert<float,2,at::Half,1>(tmp1);
                    auto tmp3 = tmp2.sin();
                    auto tmp4 = at::vec::convert<at::Half,1,float,2>(tmp3);
                    tmp4.store(out_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(20L));
                }
            }
        }
    }
    {
        {
            {
                auto tmp0 = in_ptr2[static_cast<int64_t>(0L)];
                auto tmp1 = std::max(tmp0, decltype(tmp0)(0));
                out_ptr2[static_cast<int64_t>(0L)] = tmp1;
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}
''')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        arg0_1, arg1_1, arg2_1 = args
        args.clear()
        assert_size_stride(arg0_1, (3, 4, 3, 5), (60, 15, 5, 1), 'input')
        assert_size_stride(arg1_1, (5, ), (1, ), 'input')
        buf0 = empty_strided_cpu((36, ), (1, ), torch.float16)
        buf1 = empty_strided_cpu((3, 4, 3, 5), (60, 15, 5, 1), torch.float16)
        assert_size_stride(arg2_1, (), (), 'input')
        buf2 = empty_strided_cpu((), (), torch.int32)
        cpp_fused_mv_relu_sin_view_0(arg0_1, arg1_1, arg2_1, buf0, buf1, buf2)
        del arg0_1
        del arg1_1
        del arg2_1
        return (reinterpret_tensor(buf0, (3, 4, 3), (12, 3, 1), 0), buf1, buf2, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((3, 4, 3, 5), (60, 15, 5, 1), device='cpu', dtype=torch.float16)
    arg1_1 = rand_strided((5, ), (1, ), device='cpu', dtype=torch.float16)
    arg2_1 = rand_strided((), (), device='cpu', dtype=torch.int32)
    return [arg0_1, arg1_1, arg2_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
