"""Argument schemas of torch.nn.functional's Python functions: where a positional argument's keyword name is.

Made from torch 2.13.0's `torch.nn.functional`: each function that hands its call to torch's function hooks
through one `handle_torch_function(...)` call, with that call's positional and keyword parameters and the
signature's defaults of the keyword ones (tests/pytorch/compare/test_compare_ms26x.py rebuilds the table
from the installed torch and checks it). Each API: (the signature's parameter names in order, how many of
them torch passes by position, ((keyword, default), ...) in the order torch passes them). torch hands such
a call to its function hooks with the leading parameters positional and every other one by keyword,
defaults included (`Functional.layer_norm`: input and normalized_shape positional; weight, bias and eps
by keyword), which is how msprobe's dump records it; a tool that records the call as written (msprobe
1.2.1, mindstudio-probe 26.x) may hold weight, bias and eps as positions 2-4.
"""
__all__ = ["FUNCTIONAL_SCHEMAS"]

FUNCTIONAL_SCHEMAS = {
    'adaptive_avg_pool2d': (('input', 'output_size'), 2, ()),
    'adaptive_avg_pool3d': (('input', 'output_size'), 2, ()),
    'adaptive_max_pool1d_with_indices': (('input', 'output_size', 'return_indices'), 2, (('return_indices', False),)),
    'adaptive_max_pool2d_with_indices': (('input', 'output_size', 'return_indices'), 2, (('return_indices', False),)),
    'adaptive_max_pool3d_with_indices': (('input', 'output_size', 'return_indices'), 2, (('return_indices', False),)),
    'affine_grid': (('theta', 'size', 'align_corners'), 2, (('align_corners', None),)),
    'alpha_dropout': (
        ('input', 'p', 'training', 'inplace'),
        1, (('p', 0.5), ('training', False), ('inplace', False))),
    'batch_norm': (
        ('input', 'running_mean', 'running_var', 'weight', 'bias', 'training', 'momentum', 'eps'),
        3, (('weight', None), ('bias', None), ('training', False), ('momentum', 0.1), ('eps', 1e-05))),
    'binary_cross_entropy': (
        ('input', 'target', 'weight', 'size_average', 'reduce', 'reduction'),
        2, (('weight', None), ('size_average', None), ('reduce', None), ('reduction', 'mean'))),
    'binary_cross_entropy_with_logits': (
        ('input', 'target', 'weight', 'size_average', 'reduce', 'reduction', 'pos_weight'),
        2, (('weight', None), ('size_average', None), ('reduce', None), ('reduction', 'mean'), ('pos_weight', None))),
    'celu': (('input', 'alpha', 'inplace'), 1, (('alpha', 1.0), ('inplace', False))),
    'cosine_embedding_loss': (
        ('input1', 'input2', 'target', 'margin', 'size_average', 'reduce', 'reduction'),
        3, (('margin', 0), ('size_average', None), ('reduce', None), ('reduction', 'mean'))),
    'cross_entropy': (
        ('input', 'target', 'weight', 'size_average', 'ignore_index', 'reduce', 'reduction', 'label_smoothing'),
        2,
        (('weight', None), ('size_average', None), ('ignore_index', -100), ('reduce', None), ('reduction', 'mean'),
         ('label_smoothing', 0.0))),
    'ctc_loss': (
        ('log_probs', 'targets', 'input_lengths', 'target_lengths', 'blank', 'reduction', 'zero_infinity'),
        4, (('blank', 0), ('reduction', 'mean'), ('zero_infinity', False))),
    'dropout': (('input', 'p', 'training', 'inplace'), 1, (('p', 0.5), ('training', True), ('inplace', False))),
    'dropout1d': (('input', 'p', 'training', 'inplace'), 1, (('p', 0.5), ('training', True), ('inplace', False))),
    'dropout2d': (('input', 'p', 'training', 'inplace'), 1, (('p', 0.5), ('training', True), ('inplace', False))),
    'dropout3d': (('input', 'p', 'training', 'inplace'), 1, (('p', 0.5), ('training', True), ('inplace', False))),
    'elu': (('input', 'alpha', 'inplace'), 1, (('alpha', 1.0), ('inplace', False))),
    'embedding': (
        ('input', 'weight', 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse'),
        2,
        (('padding_idx', None), ('max_norm', None), ('norm_type', 2.0), ('scale_grad_by_freq', False),
         ('sparse', False))),
    'embedding_bag': (
        ('input', 'weight', 'offsets', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'mode', 'sparse',
         'per_sample_weights', 'include_last_offset', 'padding_idx'),
        2,
        (('offsets', None), ('max_norm', None), ('norm_type', 2), ('scale_grad_by_freq', False), ('mode', 'mean'),
         ('sparse', False), ('per_sample_weights', None), ('include_last_offset', False), ('padding_idx', None))),
    'feature_alpha_dropout': (
        ('input', 'p', 'training', 'inplace'),
        1, (('p', 0.5), ('training', False), ('inplace', False))),
    'fold': (
        ('input', 'output_size', 'kernel_size', 'dilation', 'padding', 'stride'),
        3, (('dilation', 1), ('padding', 0), ('stride', 1))),
    'fractional_max_pool2d_with_indices': (
        ('input', 'kernel_size', 'output_size', 'output_ratio', 'return_indices', '_random_samples'),
        2, (('output_size', None), ('output_ratio', None), ('return_indices', False), ('_random_samples', None))),
    'fractional_max_pool3d_with_indices': (
        ('input', 'kernel_size', 'output_size', 'output_ratio', 'return_indices', '_random_samples'),
        2, (('output_size', None), ('output_ratio', None), ('return_indices', False), ('_random_samples', None))),
    'gaussian_nll_loss': (
        ('input', 'target', 'var', 'full', 'eps', 'reduction'),
        3, (('full', False), ('eps', 1e-06), ('reduction', 'mean'))),
    'glu': (('input', 'dim'), 1, (('dim', -1),)),
    'grid_sample': (
        ('input', 'grid', 'mode', 'padding_mode', 'align_corners'),
        2, (('mode', 'bilinear'), ('padding_mode', 'zeros'), ('align_corners', None))),
    'group_norm': (
        ('input', 'num_groups', 'weight', 'bias', 'eps'),
        2, (('weight', None), ('bias', None), ('eps', 1e-05))),
    'gumbel_softmax': (
        ('logits', 'tau', 'hard', 'eps', 'dim'),
        1, (('tau', 1), ('hard', False), ('eps', 1e-10), ('dim', -1))),
    'hardsigmoid': (('input', 'inplace'), 1, (('inplace', False),)),
    'hardswish': (('input', 'inplace'), 1, (('inplace', False),)),
    'hardtanh': (
        ('input', 'min_val', 'max_val', 'inplace'),
        1, (('min_val', -1.0), ('max_val', 1.0), ('inplace', False))),
    'hinge_embedding_loss': (
        ('input', 'target', 'margin', 'size_average', 'reduce', 'reduction'),
        2, (('margin', 1.0), ('size_average', None), ('reduce', None), ('reduction', 'mean'))),
    'huber_loss': (
        ('input', 'target', 'reduction', 'delta', 'weight'),
        2, (('reduction', 'mean'), ('delta', 1.0), ('weight', None))),
    'instance_norm': (
        ('input', 'running_mean', 'running_var', 'weight', 'bias', 'use_input_stats', 'momentum', 'eps'),
        1,
        (('running_mean', None), ('running_var', None), ('weight', None), ('bias', None), ('use_input_stats', True),
         ('momentum', 0.1), ('eps', 1e-05))),
    'interpolate': (
        ('input', 'size', 'scale_factor', 'mode', 'align_corners', 'recompute_scale_factor', 'antialias'),
        1,
        (('size', None), ('scale_factor', None), ('mode', 'nearest'), ('align_corners', None),
         ('recompute_scale_factor', None), ('antialias', False))),
    'kl_div': (
        ('input', 'target', 'size_average', 'reduce', 'reduction', 'log_target'),
        2, (('size_average', None), ('reduce', None), ('reduction', 'mean'), ('log_target', False))),
    'l1_loss': (
        ('input', 'target', 'size_average', 'reduce', 'reduction', 'weight'),
        2, (('size_average', None), ('reduce', None), ('reduction', 'mean'))),
    'layer_norm': (
        ('input', 'normalized_shape', 'weight', 'bias', 'eps'),
        2, (('weight', None), ('bias', None), ('eps', 1e-05))),
    'leaky_relu': (('input', 'negative_slope', 'inplace'), 1, (('negative_slope', 0.01), ('inplace', False))),
    'linear_cross_entropy': (
        ('input', 'linear_weight', 'target', 'linear_bias', 'weight', 'reduction', 'ignore_index', 'label_smoothing',
         'options'),
        3,
        (('linear_bias', None), ('weight', None), ('reduction', 'mean'), ('ignore_index', None),
         ('label_smoothing', 0.0), ('options', None))),
    'local_response_norm': (
        ('input', 'size', 'alpha', 'beta', 'k'),
        2, (('alpha', 0.0001), ('beta', 0.75), ('k', 1.0))),
    'log_softmax': (
        ('input', 'dim', '_stacklevel', 'dtype'),
        1, (('dim', None), ('_stacklevel', 3), ('dtype', None))),
    'lp_pool1d': (
        ('input', 'norm_type', 'kernel_size', 'stride', 'ceil_mode'),
        3, (('stride', None), ('ceil_mode', False))),
    'lp_pool2d': (
        ('input', 'norm_type', 'kernel_size', 'stride', 'ceil_mode'),
        3, (('stride', None), ('ceil_mode', False))),
    'lp_pool3d': (
        ('input', 'norm_type', 'kernel_size', 'stride', 'ceil_mode'),
        3, (('stride', None), ('ceil_mode', False))),
    'margin_ranking_loss': (
        ('input1', 'input2', 'target', 'margin', 'size_average', 'reduce', 'reduction'),
        3, (('margin', 0), ('size_average', None), ('reduce', None), ('reduction', 'mean'))),
    'max_pool1d_with_indices': (
        ('input', 'kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices'),
        2, (('stride', None), ('padding', 0), ('dilation', 1), ('ceil_mode', False), ('return_indices', False))),
    'max_pool2d_with_indices': (
        ('input', 'kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices'),
        2, (('stride', None), ('padding', 0), ('dilation', 1), ('ceil_mode', False), ('return_indices', False))),
    'max_pool3d_with_indices': (
        ('input', 'kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices'),
        2, (('stride', None), ('padding', 0), ('dilation', 1), ('ceil_mode', False), ('return_indices', False))),
    'max_unpool1d': (
        ('input', 'indices', 'kernel_size', 'stride', 'padding', 'output_size'),
        3, (('stride', None), ('padding', 0), ('output_size', None))),
    'max_unpool2d': (
        ('input', 'indices', 'kernel_size', 'stride', 'padding', 'output_size'),
        3, (('stride', None), ('padding', 0), ('output_size', None))),
    'max_unpool3d': (
        ('input', 'indices', 'kernel_size', 'stride', 'padding', 'output_size'),
        3, (('stride', None), ('padding', 0), ('output_size', None))),
    'mish': (('input', 'inplace'), 1, (('inplace', False),)),
    'mse_loss': (
        ('input', 'target', 'size_average', 'reduce', 'reduction', 'weight'),
        2, (('size_average', None), ('reduce', None), ('reduction', 'mean'), ('weight', None))),
    'multi_head_attention_forward': (
        ('query', 'key', 'value', 'embed_dim_to_check', 'num_heads', 'in_proj_weight', 'in_proj_bias', 'bias_k',
         'bias_v', 'add_zero_attn', 'dropout_p', 'out_proj_weight', 'out_proj_bias', 'training', 'key_padding_mask',
         'need_weights', 'attn_mask', 'use_separate_proj_weight', 'q_proj_weight', 'k_proj_weight', 'v_proj_weight',
         'static_k', 'static_v', 'average_attn_weights', 'is_causal'),
        13,
        (('training', True), ('key_padding_mask', None), ('need_weights', True), ('attn_mask', None),
         ('is_causal', False), ('use_separate_proj_weight', False), ('q_proj_weight', None), ('k_proj_weight', None),
         ('v_proj_weight', None), ('static_k', None), ('static_v', None), ('average_attn_weights', True))),
    'multi_margin_loss': (
        ('input', 'target', 'p', 'margin', 'weight', 'size_average', 'reduce', 'reduction'),
        2,
        (('p', 1), ('margin', 1.0), ('weight', None), ('size_average', None), ('reduce', None),
         ('reduction', 'mean'))),
    'multilabel_margin_loss': (
        ('input', 'target', 'size_average', 'reduce', 'reduction'),
        2, (('size_average', None), ('reduce', None), ('reduction', 'mean'))),
    'multilabel_soft_margin_loss': (
        ('input', 'target', 'weight', 'size_average', 'reduce', 'reduction'),
        2, (('weight', None), ('size_average', None), ('reduce', None), ('reduction', 'mean'))),
    'nll_loss': (
        ('input', 'target', 'weight', 'size_average', 'ignore_index', 'reduce', 'reduction'),
        2,
        (('weight', None), ('size_average', None), ('ignore_index', -100), ('reduce', None), ('reduction', 'mean'))),
    'normalize': (('input', 'p', 'dim', 'eps', 'out'), 1, (('p', 2.0), ('dim', 1), ('eps', 1e-12), ('out', None))),
    'pad': (('input', 'pad', 'mode', 'value'), 2, (('mode', 'constant'), ('value', None))),
    'poisson_nll_loss': (
        ('input', 'target', 'log_input', 'full', 'size_average', 'eps', 'reduce', 'reduction'),
        2,
        (('log_input', True), ('full', False), ('size_average', None), ('eps', 1e-08), ('reduce', None),
         ('reduction', 'mean'))),
    'relu': (('input', 'inplace'), 1, (('inplace', False),)),
    'relu6': (('input', 'inplace'), 1, (('inplace', False),)),
    'rms_norm': (('input', 'normalized_shape', 'weight', 'eps'), 2, (('weight', None), ('eps', None))),
    'rrelu': (
        ('input', 'lower', 'upper', 'training', 'inplace'),
        1, (('lower', 0.125), ('upper', 0.3333333333333333), ('training', False), ('inplace', False))),
    'selu': (('input', 'inplace'), 1, (('inplace', False),)),
    'silu': (('input', 'inplace'), 1, (('inplace', False),)),
    'smooth_l1_loss': (
        ('input', 'target', 'size_average', 'reduce', 'reduction', 'beta'),
        2, (('size_average', None), ('reduce', None), ('reduction', 'mean'), ('beta', 1.0))),
    'soft_margin_loss': (
        ('input', 'target', 'size_average', 'reduce', 'reduction'),
        2, (('size_average', None), ('reduce', None), ('reduction', 'mean'))),
    'softmax': (('input', 'dim', '_stacklevel', 'dtype'), 1, (('dim', None), ('_stacklevel', 3), ('dtype', None))),
    'softmin': (('input', 'dim', '_stacklevel', 'dtype'), 1, (('dim', None), ('_stacklevel', 3), ('dtype', None))),
    'softsign': (('input',), 1, ()),
    'tanhshrink': (('input',), 1, ()),
    'threshold': (('input', 'threshold', 'value', 'inplace'), 3, (('inplace', False),)),
    'triplet_margin_loss': (
        ('anchor', 'positive', 'negative', 'margin', 'p', 'eps', 'swap', 'size_average', 'reduce', 'reduction'),
        3,
        (('margin', 1.0), ('p', 2), ('eps', 1e-06), ('swap', False), ('size_average', None), ('reduce', None),
         ('reduction', 'mean'))),
    'triplet_margin_with_distance_loss': (
        ('anchor', 'positive', 'negative', 'distance_function', 'margin', 'swap', 'reduction'),
        3, (('distance_function', None), ('margin', 1.0), ('swap', False), ('reduction', 'mean'))),
    'unfold': (
        ('input', 'kernel_size', 'dilation', 'padding', 'stride'),
        2, (('dilation', 1), ('padding', 0), ('stride', 1))),
}
