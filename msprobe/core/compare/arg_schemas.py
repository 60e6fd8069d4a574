"""Argument schemas of torch.nn.functional's Python functions: where a positional argument's keyword name is.

Made from `inspect.signature` of torch 2.13.0 (tests/core/compare/test_normalise.py checks the table
against the installed torch). Each API: (parameter names in order, how many lead without a default, the
defaults of the rest). torch hands such a call to its function hooks with the leading parameters positional
and every other one by keyword, defaults included (`Functional.layer_norm`: input and normalized_shape
positional; weight, bias and eps by keyword), which is how msprobe's dump records it; a tool that records the
call as written (msprobe 1.2.1, mindstudio-probe 26.x) may hold weight, bias and eps as positions 2-4.
"""
__all__ = ["FUNCTIONAL_SCHEMAS"]

FUNCTIONAL_SCHEMAS = {
    'adaptive_avg_pool2d': (('input', 'output_size'), 2, ()),
    'adaptive_avg_pool3d': (('input', 'output_size'), 2, ()),
    'adaptive_max_pool1d_with_indices': (('input', 'output_size', 'return_indices'), 2, (False,)),
    'adaptive_max_pool2d_with_indices': (('input', 'output_size', 'return_indices'), 2, (False,)),
    'adaptive_max_pool3d_with_indices': (('input', 'output_size', 'return_indices'), 2, (False,)),
    'affine_grid': (('theta', 'size', 'align_corners'), 2, (None,)),
    'alpha_dropout': (('input', 'p', 'training', 'inplace'), 1, (0.5, False, False)),
    'assert_int_or_pair': (('arg', 'arg_name', 'message'), 3, ()),
    'batch_norm': (
        ('input', 'running_mean', 'running_var', 'weight', 'bias', 'training', 'momentum', 'eps'),
        3, (None, None, False, 0.1, 1e-05)),
    'binary_cross_entropy': (
        ('input', 'target', 'weight', 'size_average', 'reduce', 'reduction'),
        2, (None, None, None, 'mean')),
    'binary_cross_entropy_with_logits': (
        ('input', 'target', 'weight', 'size_average', 'reduce', 'reduction', 'pos_weight'),
        2, (None, None, None, 'mean', None)),
    'boolean_dispatch': (
        ('arg_name', 'arg_index', 'default', 'if_true', 'if_false', 'module_name', 'func_name'),
        7, ()),
    'celu': (('input', 'alpha', 'inplace'), 1, (1.0, False)),
    'cosine_embedding_loss': (
        ('input1', 'input2', 'target', 'margin', 'size_average', 'reduce', 'reduction'),
        3, (0, None, None, 'mean')),
    'cross_entropy': (
        ('input', 'target', 'weight', 'size_average', 'ignore_index', 'reduce', 'reduction', 'label_smoothing'),
        2, (None, None, -100, None, 'mean', 0.0)),
    'ctc_loss': (
        ('log_probs', 'targets', 'input_lengths', 'target_lengths', 'blank', 'reduction', 'zero_infinity'),
        4, (0, 'mean', False)),
    'dropout': (('input', 'p', 'training', 'inplace'), 1, (0.5, True, False)),
    'dropout1d': (('input', 'p', 'training', 'inplace'), 1, (0.5, True, False)),
    'dropout2d': (('input', 'p', 'training', 'inplace'), 1, (0.5, True, False)),
    'dropout3d': (('input', 'p', 'training', 'inplace'), 1, (0.5, True, False)),
    'elu': (('input', 'alpha', 'inplace'), 1, (1.0, False)),
    'embedding': (
        ('input', 'weight', 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse'),
        2, (None, None, 2.0, False, False)),
    'embedding_bag': (
        ('input', 'weight', 'offsets', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'mode', 'sparse',
         'per_sample_weights', 'include_last_offset', 'padding_idx'),
        2, (None, None, 2, False, 'mean', False, None, False, None)),
    'feature_alpha_dropout': (('input', 'p', 'training', 'inplace'), 1, (0.5, False, False)),
    'fold': (('input', 'output_size', 'kernel_size', 'dilation', 'padding', 'stride'), 3, (1, 0, 1)),
    'fractional_max_pool2d_with_indices': (
        ('input', 'kernel_size', 'output_size', 'output_ratio', 'return_indices', '_random_samples'),
        2, (None, None, False, None)),
    'fractional_max_pool3d_with_indices': (
        ('input', 'kernel_size', 'output_size', 'output_ratio', 'return_indices', '_random_samples'),
        2, (None, None, False, None)),
    'gaussian_nll_loss': (('input', 'target', 'var', 'full', 'eps', 'reduction'), 3, (False, 1e-06, 'mean')),
    'glu': (('input', 'dim'), 1, (-1,)),
    'grid_sample': (('input', 'grid', 'mode', 'padding_mode', 'align_corners'), 2, ('bilinear', 'zeros', None)),
    'group_norm': (('input', 'num_groups', 'weight', 'bias', 'eps'), 2, (None, None, 1e-05)),
    'grouped_mm': (('mat_a', 'mat_b', 'offs', 'bias', 'out_dtype'), 2, (None, None, None)),
    'gumbel_softmax': (('logits', 'tau', 'hard', 'eps', 'dim'), 1, (1, False, 1e-10, -1)),
    'hardsigmoid': (('input', 'inplace'), 1, (False,)),
    'hardswish': (('input', 'inplace'), 1, (False,)),
    'hardtanh': (('input', 'min_val', 'max_val', 'inplace'), 1, (-1.0, 1.0, False)),
    'hinge_embedding_loss': (
        ('input', 'target', 'margin', 'size_average', 'reduce', 'reduction'),
        2, (1.0, None, None, 'mean')),
    'huber_loss': (('input', 'target', 'reduction', 'delta', 'weight'), 2, ('mean', 1.0, None)),
    'instance_norm': (
        ('input', 'running_mean', 'running_var', 'weight', 'bias', 'use_input_stats', 'momentum', 'eps'),
        1, (None, None, None, None, True, 0.1, 1e-05)),
    'interpolate': (
        ('input', 'size', 'scale_factor', 'mode', 'align_corners', 'recompute_scale_factor', 'antialias'),
        1, (None, None, 'nearest', None, None, False)),
    'kl_div': (
        ('input', 'target', 'size_average', 'reduce', 'reduction', 'log_target'),
        2, (None, None, 'mean', False)),
    'l1_loss': (('input', 'target', 'size_average', 'reduce', 'reduction', 'weight'), 2, (None, None, 'mean', None)),
    'layer_norm': (('input', 'normalized_shape', 'weight', 'bias', 'eps'), 2, (None, None, 1e-05)),
    'leaky_relu': (('input', 'negative_slope', 'inplace'), 1, (0.01, False)),
    'linear_cross_entropy': (
        ('input', 'linear_weight', 'target', 'linear_bias', 'weight', 'reduction', 'ignore_index', 'label_smoothing',
         'options'),
        3, (None, None, 'mean', None, 0.0, None)),
    'local_response_norm': (('input', 'size', 'alpha', 'beta', 'k'), 2, (0.0001, 0.75, 1.0)),
    'log_softmax': (('input', 'dim', '_stacklevel', 'dtype'), 1, (None, 3, None)),
    'lp_pool1d': (('input', 'norm_type', 'kernel_size', 'stride', 'ceil_mode'), 3, (None, False)),
    'lp_pool2d': (('input', 'norm_type', 'kernel_size', 'stride', 'ceil_mode'), 3, (None, False)),
    'lp_pool3d': (('input', 'norm_type', 'kernel_size', 'stride', 'ceil_mode'), 3, (None, False)),
    'margin_ranking_loss': (
        ('input1', 'input2', 'target', 'margin', 'size_average', 'reduce', 'reduction'),
        3, (0, None, None, 'mean')),
    'max_pool1d_with_indices': (
        ('input', 'kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices'),
        2, (None, 0, 1, False, False)),
    'max_pool2d_with_indices': (
        ('input', 'kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices'),
        2, (None, 0, 1, False, False)),
    'max_pool3d_with_indices': (
        ('input', 'kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices'),
        2, (None, 0, 1, False, False)),
    'max_unpool1d': (('input', 'indices', 'kernel_size', 'stride', 'padding', 'output_size'), 3, (None, 0, None)),
    'max_unpool2d': (('input', 'indices', 'kernel_size', 'stride', 'padding', 'output_size'), 3, (None, 0, None)),
    'max_unpool3d': (('input', 'indices', 'kernel_size', 'stride', 'padding', 'output_size'), 3, (None, 0, None)),
    'mish': (('input', 'inplace'), 1, (False,)),
    'mse_loss': (('input', 'target', 'size_average', 'reduce', 'reduction', 'weight'), 2, (None, None, 'mean', None)),
    'multi_head_attention_forward': (
        ('query', 'key', 'value', 'embed_dim_to_check', 'num_heads', 'in_proj_weight', 'in_proj_bias', 'bias_k',
         'bias_v', 'add_zero_attn', 'dropout_p', 'out_proj_weight', 'out_proj_bias', 'training', 'key_padding_mask',
         'need_weights', 'attn_mask', 'use_separate_proj_weight', 'q_proj_weight', 'k_proj_weight', 'v_proj_weight',
         'static_k', 'static_v', 'average_attn_weights', 'is_causal'),
        13, (True, None, True, None, False, None, None, None, None, None, True, False)),
    'multi_margin_loss': (
        ('input', 'target', 'p', 'margin', 'weight', 'size_average', 'reduce', 'reduction'),
        2, (1, 1.0, None, None, None, 'mean')),
    'multilabel_margin_loss': (('input', 'target', 'size_average', 'reduce', 'reduction'), 2, (None, None, 'mean')),
    'multilabel_soft_margin_loss': (
        ('input', 'target', 'weight', 'size_average', 'reduce', 'reduction'),
        2, (None, None, None, 'mean')),
    'nll_loss': (
        ('input', 'target', 'weight', 'size_average', 'ignore_index', 'reduce', 'reduction'),
        2, (None, None, -100, None, 'mean')),
    'normalize': (('input', 'p', 'dim', 'eps', 'out'), 1, (2.0, 1, 1e-12, None)),
    'pad': (('input', 'pad', 'mode', 'value'), 2, ('constant', None)),
    'poisson_nll_loss': (
        ('input', 'target', 'log_input', 'full', 'size_average', 'eps', 'reduce', 'reduction'),
        2, (True, False, None, 1e-08, None, 'mean')),
    'relu': (('input', 'inplace'), 1, (False,)),
    'relu6': (('input', 'inplace'), 1, (False,)),
    'rms_norm': (('input', 'normalized_shape', 'weight', 'eps'), 2, (None, None)),
    'rrelu': (('input', 'lower', 'upper', 'training', 'inplace'), 1, (0.125, 0.3333333333333333, False, False)),
    'selu': (('input', 'inplace'), 1, (False,)),
    'sigmoid': (('input',), 1, ()),
    'silu': (('input', 'inplace'), 1, (False,)),
    'smooth_l1_loss': (
        ('input', 'target', 'size_average', 'reduce', 'reduction', 'beta'),
        2, (None, None, 'mean', 1.0)),
    'soft_margin_loss': (('input', 'target', 'size_average', 'reduce', 'reduction'), 2, (None, None, 'mean')),
    'softmax': (('input', 'dim', '_stacklevel', 'dtype'), 1, (None, 3, None)),
    'softmin': (('input', 'dim', '_stacklevel', 'dtype'), 1, (None, 3, None)),
    'softsign': (('input',), 1, ()),
    'tanh': (('input',), 1, ()),
    'tanhshrink': (('input',), 1, ()),
    'threshold': (('input', 'threshold', 'value', 'inplace'), 3, (False,)),
    'triplet_margin_loss': (
        ('anchor', 'positive', 'negative', 'margin', 'p', 'eps', 'swap', 'size_average', 'reduce', 'reduction'),
        3, (1.0, 2, 1e-06, False, None, None, 'mean')),
    'triplet_margin_with_distance_loss': (
        ('anchor', 'positive', 'negative', 'distance_function', 'margin', 'swap', 'reduction'),
        3, (None, 1.0, False, 'mean')),
    'unfold': (('input', 'kernel_size', 'dilation', 'padding', 'stride'), 2, (1, 0, 1)),
    'upsample': (('input', 'size', 'scale_factor', 'mode', 'align_corners'), 1, (None, None, 'nearest', None)),
    'upsample_bilinear': (('input', 'size', 'scale_factor'), 1, (None, None)),
    'upsample_nearest': (('input', 'size', 'scale_factor'), 1, (None, None)),
}
