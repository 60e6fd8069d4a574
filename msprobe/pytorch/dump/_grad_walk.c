/*
 * The forward side of the grad tracker (msprobe/pytorch/dump/grad_tracker.py) in C, for the call of a dumped API
 * that returns one tensor: the gradient edges of its inputs before the call, and after it the hook on its output
 * and the walk that finds the consumers of its inputs among the autograd nodes the call made.
 *
 * grad_tracker.py's GradTracker.begin, watch_outputs and _hook_consumers are the reference: the same attributes
 * are read in the same order, the same dict keys made ((id(node), output_nr)), the same hooks registered through
 * the tracker's own factories (_output_hook, _consumer_hook), so the backward side (in Python) cannot tell which
 * one ran. Nothing here is inserted into the autograd graph.
 *
 * configure(tensor_type, strided_layout, ordered_dict_type, leaf_node) once; then
 * begin_layout(args, kwargs, leaf_edges, edges, nodes) -> (args_layout, kw_layout)
 * watch_single(tracker, pending, output) -> None
 * Built as an optional extension: without it grad_tracker.py runs its Python path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *Py_NewRef(PyObject *obj)
{
    Py_INCREF(obj);
    return obj;
}
#endif

static PyObject *tensor_type, *strided, *ordered_dict, *leaf_node;
static PyObject *s_requires_grad, *s_layout, *s_dtype, *s_is_floating_point, *s_is_complex, *s_grad_fn, *s_output_nr,
    *s_next_functions, *s_sequence_nr, *s_register_hook, *s_backward_hooks, *s_register_hook_dict, *s_out,
    *s_edges, *s_seq_start, *s_out_count, *s_outputs_left, *s_contributions_left, *s_handles, *s_pending,
    *s_output_hook, *s_consumer_hook;
static PyObject *zero, *one;

static int is_tensor(PyObject *value)
{
    if (Py_TYPE(value) == (PyTypeObject *)tensor_type)
        return 1;
    return PyObject_IsInstance(value, tensor_type);
}

/* grad_tracker._tensor_wants_grad: requires grad, strided, a floating or complex dtype */
static int wants_grad(PyObject *tensor)
{
    PyObject *value = PyObject_GetAttr(tensor, s_requires_grad);
    if (value == NULL)
        return -1;
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    if (truth <= 0)
        return truth;
    value = PyObject_GetAttr(tensor, s_layout);
    if (value == NULL)
        return -1;
    truth = value == strided;
    Py_DECREF(value);
    if (!truth)
        return 0;
    PyObject *dtype = PyObject_GetAttr(tensor, s_dtype);
    if (dtype == NULL)
        return -1;
    value = PyObject_GetAttr(dtype, s_is_floating_point);
    if (value == NULL) {
        Py_DECREF(dtype);
        return -1;
    }
    truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    if (truth == 0) {
        value = PyObject_GetAttr(dtype, s_is_complex);
        truth = value == NULL ? -1 : PyObject_IsTrue(value);
        Py_XDECREF(value);
    }
    Py_DECREF(dtype);
    return truth;
}

/* isinstance(value, Tensor) and wants_grad(value) */
static int value_wants_grad(PyObject *value)
{
    int tensor = is_tensor(value);
    if (tensor <= 0)
        return tensor;
    return wants_grad(value);
}

/* GradTracker.begin's slot_of: the input's gradient edge as (id(node), output_nr), noted in edges / nodes */
static PyObject *slot_of(PyObject *tensor, PyObject *leaf_edges, PyObject *edges, PyObject *nodes)
{
    PyObject *node = PyObject_GetAttr(tensor, s_grad_fn), *output_nr;
    if (node == NULL)
        return NULL;
    if (node != Py_None) {
        output_nr = PyObject_GetAttr(tensor, s_output_nr);
        if (output_nr == NULL) {
            Py_DECREF(node);
            return NULL;
        }
    } else {
        Py_DECREF(node);
        node = NULL;
        PyObject *key = PyLong_FromVoidPtr(tensor);
        if (key == NULL)
            return NULL;
        PyObject *known = PyDict_GetItemWithError(leaf_edges, key); /* borrowed */
        if (known == NULL && PyErr_Occurred()) {
            Py_DECREF(key);
            return NULL;
        }
        if (known != NULL && PyTuple_CheckExact(known) && PyTuple_GET_SIZE(known) == 2 &&
            PyTuple_GET_ITEM(known, 0) == tensor) {
            node = Py_NewRef(PyTuple_GET_ITEM(known, 1));
        } else {
            node = PyObject_CallOneArg(leaf_node, tensor);
            PyObject *entry = node == NULL ? NULL : PyTuple_Pack(2, tensor, node);
            if (entry == NULL || PyDict_SetItem(leaf_edges, key, entry) < 0) {
                Py_XDECREF(entry);
                Py_XDECREF(node);
                Py_DECREF(key);
                return NULL;
            }
            Py_DECREF(entry);
        }
        Py_DECREF(key);
        output_nr = Py_NewRef(zero);
    }
    PyObject *node_id = PyLong_FromVoidPtr(node), *slot = NULL;
    if (node_id != NULL) {
        slot = PyTuple_Pack(2, node_id, output_nr);
        Py_DECREF(node_id);
    }
    Py_DECREF(output_nr);
    if (slot != NULL) {
        int known = PyDict_Contains(edges, slot);
        if (known < 0 || (!known && (PyDict_SetItem(edges, slot, slot) < 0 || PyList_Append(nodes, node) < 0)))
            Py_CLEAR(slot);
    }
    Py_DECREF(node);
    return slot;
}

static PyObject *begin_layout(PyObject *Py_UNUSED(self), PyObject *const *argv, Py_ssize_t nargs)
{
    if (nargs != 5 || tensor_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "begin_layout(args, kwargs, leaf_edges, edges, nodes) after configure()");
        return NULL;
    }
    PyObject *args = argv[0], *kwargs = argv[1], *leaf_edges = argv[2], *edges = argv[3], *nodes = argv[4];
    if (!PyDict_Check(leaf_edges) || !PyDict_Check(edges) || !PyList_Check(nodes) ||
        (kwargs != Py_None && !PyDict_Check(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "begin_layout: dicts and a list expected");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args, "begin_layout: args must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *layout = PyList_New(n), *kw_layout = NULL;
    if (layout == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *arg = PySequence_Fast_GET_ITEM(seq, i), *entry = NULL;
        int tensor = is_tensor(arg);
        if (tensor < 0)
            goto fail;
        if (tensor) {
            int wants = wants_grad(arg);
            if (wants < 0)
                goto fail;
            entry = wants ? slot_of(arg, leaf_edges, edges, nodes) : Py_NewRef(Py_None);
        } else if (PyList_CheckExact(arg) || PyTuple_CheckExact(arg)) {
            Py_ssize_t m = PySequence_Fast_GET_SIZE(arg), j;
            int any = 0;
            for (j = 0; j < m && !any; j++) {
                any = value_wants_grad(PySequence_Fast_GET_ITEM(arg, j));
                if (any < 0)
                    goto fail;
            }
            if (!any) {
                entry = Py_NewRef(Py_None);
            } else {
                entry = PyList_New(m);
                for (j = 0; entry != NULL && j < m; j++) {
                    PyObject *item = PySequence_Fast_GET_ITEM(arg, j), *slot;
                    int wants = value_wants_grad(item);
                    slot = wants < 0 ? NULL : wants ? slot_of(item, leaf_edges, edges, nodes) : Py_NewRef(Py_None);
                    if (slot == NULL)
                        Py_CLEAR(entry);
                    else
                        PyList_SET_ITEM(entry, j, slot);
                }
            }
        } else {
            entry = Py_NewRef(Py_None);
        }
        if (entry == NULL)
            goto fail;
        PyList_SET_ITEM(layout, i, entry);
    }
    kw_layout = PyList_New(0);
    if (kw_layout == NULL)
        goto fail;
    if (kwargs != Py_None) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(kwargs, &pos, &key, &value)) {
            int is_out = PyObject_RichCompareBool(key, s_out, Py_EQ);
            if (is_out < 0)
                goto fail;
            int tensor = is_tensor(value);
            if (tensor < 0)
                goto fail;
            int wants = 0;
            if (!is_out && tensor && (wants = wants_grad(value)) < 0)
                goto fail;
            PyObject *slot = NULL;
            if (wants)
                slot = slot_of(value, leaf_edges, edges, nodes);
            else if (tensor)
                slot = Py_NewRef(Py_None);
            else
                continue;
            if (slot == NULL || PyList_Append(kw_layout, slot) < 0) {
                Py_XDECREF(slot);
                goto fail;
            }
            Py_DECREF(slot);
        }
    }
    Py_DECREF(seq);
    PyObject *result = PyTuple_Pack(2, layout, kw_layout);
    Py_DECREF(layout);
    Py_DECREF(kw_layout);
    return result;
fail:
    Py_DECREF(seq);
    Py_XDECREF(layout);
    Py_XDECREF(kw_layout);
    return NULL;
}

/* node._sequence_nr() >= start; -1 on error (sequence numbers are uint64: AccumulateGrad's is the largest) */
static int newer(PyObject *node, unsigned long long start)
{
    PyObject *nr = PyObject_CallMethodNoArgs(node, s_sequence_nr);
    if (nr == NULL)
        return -1;
    unsigned long long value = PyLong_AsUnsignedLongLong(nr);
    Py_DECREF(nr);
    if (value == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    return value >= start;
}

static int add_to_attr(PyObject *obj, PyObject *name, PyObject *amount)
{
    PyObject *value = PyObject_GetAttr(obj, name), *sum;
    if (value == NULL)
        return -1;
    sum = PyNumber_Add(value, amount);
    Py_DECREF(value);
    if (sum == NULL)
        return -1;
    int rc = PyObject_SetAttr(obj, name, sum);
    Py_DECREF(sum);
    return rc;
}

/* (id(node), output_nr) */
static PyObject *edge_key(PyObject *node, PyObject *output_nr)
{
    PyObject *node_id = PyLong_FromVoidPtr(node);
    if (node_id == NULL)
        return NULL;
    PyObject *key = PyTuple_Pack(2, node_id, output_nr);
    Py_DECREF(node_id);
    return key;
}

/* GradTracker._hook_consumers for one root, the output's node; root_is_input: the output's edge is an input's (an
 * input returned unchanged), which has no consumer in the call. Hook handles go to `handles` (tracker.handles). */
static int hook_consumers(PyObject *tracker, PyObject *pending, PyObject *edges, PyObject *handles, PyObject *root,
                          int root_is_input)
{
    PyObject *start_obj = PyObject_GetAttr(pending, s_seq_start);
    if (start_obj == NULL)
        return -1;
    unsigned long long start = PyLong_AsUnsignedLongLong(start_obj);
    Py_DECREF(start_obj);
    if (start == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    PyObject *seen = PyDict_New(), *stack = PyList_New(0), *consumers = PyList_New(0), *key = NULL;
    int rc = -1;
    if (seen == NULL || stack == NULL || consumers == NULL)
        goto done;
    if (!root_is_input) {
        int fresh = newer(root, start);
        if (fresh < 0)
            goto done;
        if (fresh) {
            PyObject *root_id = PyLong_FromVoidPtr(root);
            if (root_id == NULL || PyDict_SetItem(seen, root_id, root) < 0 || PyList_Append(stack, root) < 0) {
                Py_XDECREF(root_id);
                goto done;
            }
            Py_DECREF(root_id);
        }
    }
    while (PyList_GET_SIZE(stack)) {
        Py_ssize_t last = PyList_GET_SIZE(stack) - 1;
        PyObject *node = Py_NewRef(PyList_GET_ITEM(stack, last)), *links = NULL;
        if (PyList_SetSlice(stack, last, last + 1, NULL) < 0) {
            Py_DECREF(node);
            goto done;
        }
        PyObject *next = PyObject_GetAttr(node, s_next_functions);
        PyObject *fast = next == NULL ? NULL : PySequence_Fast(next, "next_functions must be a sequence");
        Py_XDECREF(next);
        if (fast == NULL) {
            Py_DECREF(node);
            goto done;
        }
        Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
        int failed = 0;
        for (Py_ssize_t index = 0; index < count && !failed; index++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(fast, index);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
                PyErr_SetString(PyExc_TypeError, "next_functions: pairs expected");
                failed = 1;
                break;
            }
            PyObject *child = PyTuple_GET_ITEM(pair, 0), *output_nr = PyTuple_GET_ITEM(pair, 1);
            if (child == Py_None)
                continue;
            key = edge_key(child, output_nr);
            PyObject *slot = key == NULL ? NULL : PyDict_GetItemWithError(edges, key); /* borrowed */
            Py_CLEAR(key);
            if (slot == NULL && PyErr_Occurred()) {
                failed = 1;
            } else if (slot != NULL) {
                if (links == NULL) {
                    links = PyList_New(0);
                    PyObject *consumer = links == NULL ? NULL : PyTuple_Pack(2, node, links);
                    if (consumer == NULL || PyList_Append(consumers, consumer) < 0)
                        failed = 1;
                    Py_XDECREF(consumer);
                }
                PyObject *index_obj = failed ? NULL : PyLong_FromSsize_t(index);
                PyObject *link = index_obj == NULL ? NULL : PyTuple_Pack(2, index_obj, slot);
                Py_XDECREF(index_obj);
                if (link == NULL || PyList_Append(links, link) < 0)
                    failed = 1;
                Py_XDECREF(link);
            } else {
                int fresh = newer(child, start);
                if (fresh < 0) {
                    failed = 1;
                } else if (fresh) {
                    PyObject *child_id = PyLong_FromVoidPtr(child);
                    int was_seen = child_id == NULL ? -1 : PyDict_Contains(seen, child_id);
                    if (was_seen < 0 ||
                        (!was_seen && (PyDict_SetItem(seen, child_id, child) < 0 || PyList_Append(stack, child) < 0)))
                        failed = 1;
                    Py_XDECREF(child_id);
                }
            }
        }
        Py_XDECREF(links);
        Py_DECREF(fast);
        Py_DECREF(node);
        if (failed)
            goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(consumers); i++) {
        PyObject *consumer = PyList_GET_ITEM(consumers, i);
        if (add_to_attr(pending, s_contributions_left, one) < 0)
            goto done;
        PyObject *hook = PyObject_CallMethodObjArgs(tracker, s_consumer_hook, pending, PyTuple_GET_ITEM(consumer, 1),
                                                    NULL);
        PyObject *handle = hook == NULL ? NULL :
            PyObject_CallMethodOneArg(PyTuple_GET_ITEM(consumer, 0), s_register_hook, hook);
        Py_XDECREF(hook);
        int appended = handle == NULL ? -1 : PyList_Append(handles, handle);
        Py_XDECREF(handle);
        if (appended < 0)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(seen);
    Py_XDECREF(stack);
    Py_XDECREF(consumers);
    return rc;
}

/* grad_tracker._hook_output: the hook in the tensor's own hook dict (registered once on `node`, its grad_fn),
 * (dict, hook) to `handles`; a tensor subclass takes register_hook */
static int hook_output(PyObject *value, PyObject *node, PyObject *hook, PyObject *handles)
{
    PyObject *entry = NULL;
    if (Py_TYPE(value) != (PyTypeObject *)tensor_type) {
        entry = PyObject_CallMethodOneArg(value, s_register_hook, hook);
    } else {
        PyObject *hooks = PyObject_GetAttr(value, s_backward_hooks);
        if (hooks == Py_None) {
            Py_DECREF(hooks);
            hooks = PyObject_CallNoArgs(ordered_dict);
            PyObject *done = NULL;
            if (hooks == NULL || PyObject_SetAttr(value, s_backward_hooks, hooks) < 0 ||
                (done = PyObject_CallMethodOneArg(node, s_register_hook_dict, value)) == NULL)
                Py_CLEAR(hooks);
            Py_XDECREF(done);
        }
        if (hooks != NULL && PyObject_SetItem(hooks, hook, hook) == 0)
            entry = PyTuple_Pack(2, hooks, hook);
        Py_XDECREF(hooks);
    }
    int rc = entry == NULL ? -1 : PyList_Append(handles, entry);
    Py_XDECREF(entry);
    return rc;
}

/* GradTracker.watch_outputs for a call that returned one tensor */
static PyObject *watch_single(PyObject *Py_UNUSED(self), PyObject *const *argv, Py_ssize_t nargs)
{
    if (nargs != 3 || tensor_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "watch_single(tracker, pending, output) after configure()");
        return NULL;
    }
    PyObject *tracker = argv[0], *pending = argv[1], *value = argv[2];
    PyObject *edges = NULL, *handles = NULL, *node = NULL, *output_nr = NULL, *outputs_left = NULL;
    PyObject *result = NULL;
    int root_is_input = 0;
    if (PyObject_SetAttr(pending, s_out_count, one) < 0 || (edges = PyObject_GetAttr(pending, s_edges)) == NULL)
        return NULL;
    if ((handles = PyObject_GetAttr(tracker, s_handles)) == NULL)
        goto done;
    if (!PyDict_Check(edges)) {
        PyErr_SetString(PyExc_TypeError, "watch_single: pending.edges must be a dict");
        goto done;
    }
    PyObject *requires = PyObject_GetAttr(value, s_requires_grad);
    int truth = requires == NULL ? -1 : PyObject_IsTrue(requires);
    Py_XDECREF(requires);
    if (truth < 0)
        goto done;
    if (truth) {
        node = PyObject_GetAttr(value, s_grad_fn);
        if (node == NULL)
            goto done;
        if (node == Py_None) {
            Py_CLEAR(node);
        } else {
            output_nr = PyObject_GetAttr(value, s_output_nr);
            outputs_left = output_nr == NULL ? NULL : PyObject_GetAttr(pending, s_outputs_left);
            if (outputs_left == NULL || PySet_Add(outputs_left, zero) < 0)
                goto done;
            PyObject *through = Py_None; /* borrowed */
            if (PyDict_GET_SIZE(edges)) {
                PyObject *key = edge_key(node, output_nr);
                through = key == NULL ? NULL : PyDict_GetItemWithError(edges, key);
                Py_XDECREF(key);
                if (through == NULL) {
                    if (PyErr_Occurred())
                        goto done;
                    through = Py_None;
                }
            }
            root_is_input = through != Py_None;
            if (root_is_input && add_to_attr(pending, s_contributions_left, one) < 0)
                goto done;
            PyObject *hook = PyObject_CallMethodObjArgs(tracker, s_output_hook, pending, zero, through, NULL);
            if (hook == NULL)
                goto done;
            int rc = hook_output(value, node, hook, handles);
            Py_DECREF(hook);
            if (rc < 0)
                goto done;
        }
    }
    if (PyDict_GET_SIZE(edges) && node != NULL &&
        hook_consumers(tracker, pending, edges, handles, node, root_is_input) < 0)
        goto done;
    /* kept while an output grad or an input's contribution is still to come */
    PyObject *left = PyObject_GetAttr(pending, s_outputs_left);
    int keep = left == NULL ? -1 : PyObject_IsTrue(left);
    Py_XDECREF(left);
    if (keep == 0) {
        PyObject *contributions = PyObject_GetAttr(pending, s_contributions_left);
        keep = contributions == NULL ? -1 : PyObject_IsTrue(contributions);
        Py_XDECREF(contributions);
    }
    if (keep < 0)
        goto done;
    if (keep) {
        PyObject *list = PyObject_GetAttr(tracker, s_pending);
        int rc = list == NULL ? -1 : PyList_Append(list, pending);
        Py_XDECREF(list);
        if (rc < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(edges);
    Py_XDECREF(handles);
    Py_XDECREF(node);
    Py_XDECREF(output_nr);
    Py_XDECREF(outputs_left);
    return result;
}

static PyObject *configure(PyObject *Py_UNUSED(self), PyObject *const *argv, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyType_Check(argv[0]) || !PyCallable_Check(argv[2]) || !PyCallable_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "configure(tensor_type, strided_layout, ordered_dict_type, leaf_node)");
        return NULL;
    }
    Py_XSETREF(tensor_type, Py_NewRef(argv[0]));
    Py_XSETREF(strided, Py_NewRef(argv[1]));
    Py_XSETREF(ordered_dict, Py_NewRef(argv[2]));
    Py_XSETREF(leaf_node, Py_NewRef(argv[3]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(tensor_type, strided_layout, ordered_dict_type, leaf_node): what the walks compare with and call."},
    {"begin_layout", (PyCFunction)(void (*)(void))begin_layout, METH_FASTCALL,
     "begin_layout(args, kwargs, leaf_edges, edges, nodes) -> (args_layout, kw_layout): GradTracker.begin's walk."},
    {"watch_single", (PyCFunction)(void (*)(void))watch_single, METH_FASTCALL,
     "watch_single(tracker, pending, output): GradTracker.watch_outputs for one tensor output."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_grad_walk", "The grad tracker's forward walks (grad_tracker.py) in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__grad_walk(void)
{
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_requires_grad, "requires_grad");
    INTERN(s_layout, "layout");
    INTERN(s_dtype, "dtype");
    INTERN(s_is_floating_point, "is_floating_point");
    INTERN(s_is_complex, "is_complex");
    INTERN(s_grad_fn, "grad_fn");
    INTERN(s_output_nr, "output_nr");
    INTERN(s_next_functions, "next_functions");
    INTERN(s_sequence_nr, "_sequence_nr");
    INTERN(s_register_hook, "register_hook");
    INTERN(s_backward_hooks, "_backward_hooks");
    INTERN(s_register_hook_dict, "_register_hook_dict");
    INTERN(s_out, "out");
    INTERN(s_edges, "edges");
    INTERN(s_seq_start, "seq_start");
    INTERN(s_out_count, "out_count");
    INTERN(s_outputs_left, "outputs_left");
    INTERN(s_contributions_left, "contributions_left");
    INTERN(s_handles, "handles");
    INTERN(s_pending, "pending");
    INTERN(s_output_hook, "_output_hook");
    INTERN(s_consumer_hook, "_consumer_hook");
#undef INTERN
    if ((zero = PyLong_FromLong(0)) == NULL || (one = PyLong_FromLong(1)) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
