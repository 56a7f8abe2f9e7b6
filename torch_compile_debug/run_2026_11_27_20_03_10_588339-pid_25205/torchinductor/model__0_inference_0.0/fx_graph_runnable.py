
import os
os.environ['TORCHINDUCTOR_CACHE_DIR'] = '/tmp/torchinductor_root'
os.environ['TORCHINDUCTOR_PATTERN_MATCH_DEBUG'] = 'dlcfuzz-no-such-node'
os.environ.pop('TORCHDYNAMO_REPRO_AFTER', None)
os.environ.pop('TORCHDYNAMO_REPRO_LEVEL', None)

import torch
from torch import tensor, device
import torch.fx as fx
from torch._dynamo.testing import rand_strided
from math import inf
import torch._inductor.inductor_prims



import torch._dynamo.config
import torch._inductor.config
import torch._functorch.config
import torch.fx.experimental._config
torch._dynamo.config.recompile_limit = 64
torch._dynamo.config.capture_scalar_outputs = True
torch._dynamo.config.capture_dynamic_output_shape_ops = True
torch._inductor.config.fx_graph_cache = False
torch._inductor.config.autotune_num_choices_displayed = 0
torch._inductor.config.max_autotune_report_choices_stats = False
torch._inductor.config.compile_threads = 1
torch._inductor.config.trace.enabled = False
torch._inductor.config.emulate_precision_casts = True
torch._inductor.config.trace.save_real_tensors = False
torch._functorch.config.functionalize_rng_ops = False
torch._functorch.config.enable_autograd_cache = False
torch._functorch.config.fake_tensor_allow_unsafe_data_ptr_access = True
torch._functorch.config.unlift_effect_tokens = True
torch._functorch.config.selective_decompose = False



isolate_fails_code_str = None





if "__compile_source__" in globals():
    import inspect as __after_aot_inspect
    import linecache as __after_aot_linecache
    __after_aot_filename = __after_aot_inspect.currentframe().f_code.co_filename
    __after_aot_linecache.cache[__after_aot_filename] = (
        len(__compile_source__),
        None,
        __compile_source__.splitlines(True),
        __after_aot_filename,
    )
# torch version: 2.13.0+cpu
# torch cuda version: None
# torch git version: cf30153c4c131c8164ee7798e5022d810682e2cb


# torch.cuda.is_available()==False, no GPU info collected
torch._higher_order_ops.triton_kernel_wrap.kernel_side_table.reset_table()

from torch.nn import *
class Repro(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()



    def forward(self, arg0_1, arg1_1, arg2_1):
        view = torch.ops.aten.view.default(arg0_1, [36, 5])
        convert_element_type = torch.ops.prims.convert_element_type.default(view, torch.float32);  view = None
        convert_element_type_1 = torch.ops.prims.convert_element_type.default(arg1_1, torch.float32);  arg1_1 = None
        mul = torch.ops.aten.mul.Tensor(convert_element_type, convert_element_type_1);  convert_element_type = convert_element_type_1 = None
        sum_1 = torch.ops.aten.sum.dim_IntList(mul, [1]);  mul = None
        convert_element_type_2 = torch.ops.prims.convert_element_type.default(sum_1, torch.float16);  sum_1 = None
        view_1 = torch.ops.aten.view.default(convert_element_type_2, [3, 4, 3]);  convert_element_type_2 = None
        sin = torch.ops.aten.sin.default(arg0_1);  arg0_1 = None
        relu = torch.ops.aten.relu.default(arg2_1);  arg2_1 = None
        return (view_1, sin, relu)

def load_args(reader):
    buf0 = reader.storage(None, 360, dtype_hint=torch.float16)
    reader.tensor(buf0, (3, 4, 3, 5), dtype=torch.float16, is_leaf=True)  # arg0_1
    buf1 = reader.storage(None, 10, dtype_hint=torch.float16)
    reader.tensor(buf1, (5,), dtype=torch.float16, is_leaf=True)  # arg1_1
    buf2 = reader.storage(None, 4, dtype_hint=torch.int32)
    reader.tensor(buf2, (), dtype=torch.int32, is_leaf=True)  # arg2_1
load_args._version = 0
mod = Repro()
if __name__ == '__main__':
    from torch._dynamo.repro.after_aot import run_repro
    with torch.no_grad():
        run_repro(mod, load_args, accuracy=False, command='run', save_dir=None, tracing_mode='real', check_str=None)
        # To run it separately, do 
        # mod, args = run_repro(mod, load_args, accuracy=False, command='get_args', save_dir=None, tracing_mode='real', check_str=None)
        # mod(*args)