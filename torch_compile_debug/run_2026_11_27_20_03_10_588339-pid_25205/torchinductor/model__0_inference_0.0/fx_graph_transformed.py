class <lambda>(torch.nn.Module):
    def forward(self, arg0_1: "f16[3, 4, 3, 5]", arg1_1: "f16[5]", arg2_1: "i32[]"):
        # No stacktrace found for following nodes
        view: "f16[36, 5]" = torch.ops.aten.reshape.default(arg0_1, [36, 5])
        convert_element_type: "f32[36, 5]" = torch.ops.prims.convert_element_type.default(view, torch.float32);  view = None
        convert_element_type_1: "f32[5]" = torch.ops.prims.convert_element_type.default(arg1_1, torch.float32);  arg1_1 = None
        mul: "f32[36, 5]" = torch.ops.aten.mul.Tensor(convert_element_type, convert_element_type_1);  convert_element_type = convert_element_type_1 = None
        sum_1: "f32[36]" = torch.ops.aten.sum.dim_IntList(mul, [1]);  mul = None
        convert_element_type_2: "f16[36]" = torch.ops.prims.convert_element_type.default(sum_1, torch.float16);  sum_1 = None
        view_1: "f16[3, 4, 3]" = torch.ops.aten.reshape.default(convert_element_type_2, [3, 4, 3]);  convert_element_type_2 = None
        sin: "f16[3, 4, 3, 5]" = torch.ops.aten.sin.default(arg0_1);  arg0_1 = None
        relu: "i32[]" = torch.ops.aten.relu.default(arg2_1);  arg2_1 = None
        return (view_1, sin, relu)
