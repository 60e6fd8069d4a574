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
 * OutputHook / ConsumerHook: the backward hooks' closures as callables, emit(tracker, pending): _emit (below)
 * Lane: a recorded API call's whole bookkeeping, ModeEntry: the mode's __torch_function__ around it (below)
 * configure_defaults(...): the hooks and emit then skip GradTracker's factories and _emit and run DumpCollector.backward's
 * common case themselves where those are still the classes' own; Paused: dump_session's pause; register_node_hook:
 * torch's Node hook registration without its Python handle, for the consumer hooks (the dump window puts it in place)
 * Built as an optional extension: without it grad_tracker.py runs its Python path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#ifndef Py_TPFLAGS_HAVE_VECTORCALL
#define Py_TPFLAGS_HAVE_VECTORCALL _Py_TPFLAGS_HAVE_VECTORCALL
#endif

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *Py_NewRef(PyObject *obj)
{
    Py_INCREF(obj);
    return obj;
}
#endif

/* tp_traverse, tp_clear and tp_dealloc of a C type whose object fields FIELDS(X) lists (X(name) for each) */
#define GC_FUNCTIONS(prefix, ctype, FIELDS)                                                                    \
    static int prefix##_traverse(PyObject *self, visitproc visit, void *arg)                                 \
    {                                                                                                          \
        ctype *obj = (ctype *)self;                                                                            \
        FIELDS(GC_VISIT_FIELD)                                                                                 \
        return 0;                                                                                              \
    }                                                                                                          \
    static int prefix##_clear(PyObject *self)                                                                  \
    {                                                                                                          \
        ctype *obj = (ctype *)self;                                                                            \
        FIELDS(GC_CLEAR_FIELD)                                                                                 \
        return 0;                                                                                              \
    }                                                                                                          \
    static void prefix##_dealloc(PyObject *self)                                                               \
    {                                                                                                          \
        PyObject_GC_UnTrack(self);                                                                             \
        prefix##_clear(self);                                                                                  \
        Py_TYPE(self)->tp_free(self);                                                                          \
    }
#define GC_VISIT_FIELD(field) Py_VISIT(obj->field);
#define GC_CLEAR_FIELD(field) Py_CLEAR(obj->field);

/* a C type of those functions, made by prefix##_new, with `flags` beside the default and GC ones; the rest of the
 * slots (methods, members) follow */
#define GC_TYPE(var, ctype, prefix, name, doc, flags, ...)                                                    \
    static PyTypeObject var = {                                                                               \
        PyVarObject_HEAD_INIT(NULL, 0)                                                                        \
        .tp_name = "msprobe.pytorch.dump._grad_walk." name,                                                   \
        .tp_basicsize = sizeof(ctype),                                                                        \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | (flags),                                        \
        .tp_doc = doc,                                                                                        \
        .tp_new = prefix##_new,                                                                               \
        .tp_dealloc = prefix##_dealloc,                                                                       \
        .tp_traverse = prefix##_traverse,                                                                     \
        .tp_clear = prefix##_clear,                                                                           \
        __VA_ARGS__                                                                                           \
    };
/* a callable one (vectorcall through the struct's `vectorcall` field) */
#define CALLABLE_TYPE(var, ctype, prefix, name, doc, ...)                                                     \
    GC_TYPE(var, ctype, prefix, name, doc, Py_TPFLAGS_HAVE_VECTORCALL, .tp_call = PyVectorcall_Call,          \
            .tp_vectorcall_offset = offsetof(ctype, vectorcall), __VA_ARGS__)

static PyObject *tensor_type, *strided, *ordered_dict, *leaf_node;
static PyObject *s_requires_grad, *s_layout, *s_dtype, *s_is_floating_point, *s_is_complex, *s_grad_fn, *s_output_nr,
    *s_next_functions, *s_sequence_nr, *s_register_hook, *s_backward_hooks, *s_register_hook_dict, *s_out,
    *s_edges, *s_seq_start, *s_out_count, *s_outputs_left, *s_contributions_left, *s_handles, *s_pending,
    *s_output_hook, *s_consumer_hook;
static PyObject *zero, *one, *minus_one;
static PyObject *s_records, *s_on_tensor, *s_describe_tensor, *s_describe, *s_describe_output, *s_counters,
    *s_module_stack, *s_current_step, *s_stack_key, *s_stack_cache, *s_data, *s_stacks, *s_construct, *s_dirty,
    *s_active, *s_walk_seq, *s_walk_map, *s_untrack, *s_tensor_class, *s_name, *s_leaf_edges, *s_watch_outputs,
    *s_input_args, *s_input_kwargs, *s_output, *s_forward_suffix, *s_level, *s_l1, *s_stack_capture, *s_capture;
static PyObject *s_key, *s_silenced;
static PyObject *s_dump, *s_lane_names;

/* ---- shortcuts past Python methods that are still the classes' own ---------------------------------------------
 * configure_defaults(tracker_globals, tracker_type, collector_type, register_hook) stores what the tracker's
 * _output_hook, _consumer_hook and _emit and the collector's backward are in their classes, grad_tracker.py's module
 * globals (its _OutputHook, _ConsumerHook, _emit_native switches) and torch's own Node hook registration (the
 * original of register_node_hook below). Where a method is still the class's own (not replaced on the class or
 * the instance: tests and tasks may) and its switch is on, the C code here does what that method would do without
 * calling it (no Python frame); anything else calls the method. */
static PyObject *tracker_globals, *orig_output_hook, *orig_consumer_hook, *orig_emit, *orig_backward;
static PyObject *register_original;
static PyObject *s_OutputHook, *s_ConsumerHook, *s_emit_native;

static int is_default(PyObject *obj, PyObject *name, PyObject *original)
{
    if (original == NULL || _PyType_Lookup(Py_TYPE(obj), name) != original)
        return 0;
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL) {
        PyErr_Clear();
        return 0;
    }
    int has = PyDict_Contains(dict, name);
    Py_DECREF(dict);
    if (has < 0)
        PyErr_Clear();
    return has == 0;
}

/* ---- slot access: the tracker's PendingBackward and the collector's ForwardCall are __slots__ classes whose fields
 * the hooks and emit read and write many times a call; for an instance of exactly one of those classes (registered
 * by configure_defaults from the classes' member descriptors) a field is read or written in place, as the member
 * descriptor would do it; anything else goes through getattr / setattr. */
#define SLOT_MAX 24
typedef struct {
    PyTypeObject *type;
    int count;
    PyObject *names[SLOT_MAX];
    Py_ssize_t offsets[SLOT_MAX];
} slot_class_t;
static slot_class_t slot_classes[2];

static PyObject **slot_ptr(PyObject *obj, PyObject *name)
{
    for (int c = 0; c < 2; c++) {
        if (Py_TYPE(obj) != slot_classes[c].type)
            continue;
        for (int i = 0; i < slot_classes[c].count; i++)
            if (slot_classes[c].names[i] == name)
                return (PyObject **)((char *)obj + slot_classes[c].offsets[i]);
        return NULL;
    }
    return NULL;
}

static PyObject *get_attr(PyObject *obj, PyObject *name)
{
    PyObject **slot = slot_ptr(obj, name);
    if (slot == NULL)
        return PyObject_GetAttr(obj, name);
    if (*slot == NULL) {
        PyErr_SetObject(PyExc_AttributeError, name);
        return NULL;
    }
    return Py_NewRef(*slot);
}

static int set_attr(PyObject *obj, PyObject *name, PyObject *value)
{
    PyObject **slot = slot_ptr(obj, name);
    if (slot == NULL)
        return PyObject_SetAttr(obj, name, value);
    Py_XSETREF(*slot, Py_NewRef(value));
    return 0;
}

/* the class's object slots (member descriptors of T_OBJECT_EX), their names interned */
static int register_slots(slot_class_t *c, PyObject *type)
{
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "configure_defaults: a class expected");
        return -1;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *descr;
    int count = 0;
    PyObject *names[SLOT_MAX];
    Py_ssize_t offsets[SLOT_MAX];
    while (PyDict_Next(((PyTypeObject *)type)->tp_dict, &pos, &key, &descr)) {
        if (Py_TYPE(descr) != &PyMemberDescr_Type || ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX ||
            !PyUnicode_CheckExact(key))
            continue;
        if (count == SLOT_MAX) {
            PyErr_SetString(PyExc_TypeError, "configure_defaults: too many slots");
            return -1;
        }
        Py_INCREF(key);
        PyUnicode_InternInPlace(&key);
        names[count] = key;
        offsets[count++] = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    for (int i = 0; i < c->count; i++)
        Py_DECREF(c->names[i]);
    Py_XDECREF(c->type);
    c->type = (PyTypeObject *)Py_NewRef(type);
    c->count = count;
    memcpy(c->names, names, sizeof(PyObject *) * (size_t)count);
    memcpy(c->offsets, offsets, sizeof(Py_ssize_t) * (size_t)count);
    return 0;
}

/* grad_tracker.<name> is `value` (borrowed lookups; no exception left) */
static int global_is(PyObject *name, PyObject *value)
{
    if (tracker_globals == NULL)
        return 0;
    PyObject *found = PyDict_GetItemWithError(tracker_globals, name);
    if (found == NULL)
        PyErr_Clear();
    return found != NULL && found == value;
}
static PyObject *s_enter, *s_exit, *s_guard, *s_report, *s_backward_name;

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

/* obj.<name> += amount; the new value's truth (-1 on error) */
static int add_to_attr(PyObject *obj, PyObject *name, PyObject *amount)
{
    PyObject *value = get_attr(obj, name), *sum;
    if (value == NULL)
        return -1;
    sum = PyNumber_Add(value, amount);
    Py_DECREF(value);
    if (sum == NULL)
        return -1;
    int truth = set_attr(obj, name, sum) < 0 ? -1 : PyObject_IsTrue(sum);
    Py_DECREF(sum);
    return truth;
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

/* tracker._output_hook(pending, position, through) (output) or tracker._consumer_hook(pending, links[, root]) (root: the
 * output_nr whose grad the consumer hook takes as the output's; `through` NULL: none) (defined below) */
static PyObject *make_hook(int output, PyObject *tracker, PyObject *pending, PyObject *position, PyObject *through);

/* GradTracker._hook_consumers for one root, the output's node; root_is_input: the output's edge is an input's (an
 * input returned unchanged), which has no consumer in the call. Hook handles go to `handles` (tracker.handles).
 * root_output_nr (or NULL): the output's own grad is taken by the root's consumer hook, when the root is a consumer,
 * from the grads the node received (position 0); 1 when it was, 0 when not (or no root_output_nr), -1 failed. */
static int hook_consumers(PyObject *tracker, PyObject *pending, PyObject *edges, PyObject *handles, PyObject *root,
                          int root_is_input, PyObject *root_output_nr)
{
    PyObject *start_obj = get_attr(pending, s_seq_start);
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
    int merged = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(consumers); i++) {
        PyObject *consumer = PyList_GET_ITEM(consumers, i);
        if (add_to_attr(pending, s_contributions_left, one) < 0)
            goto done;
        int is_root = root_output_nr != NULL && PyTuple_GET_ITEM(consumer, 0) == root;
        merged |= is_root;
        PyObject *hook = make_hook(0, tracker, pending, PyTuple_GET_ITEM(consumer, 1), is_root ? root_output_nr : NULL);
        PyObject *handle = hook == NULL ? NULL :
            PyObject_CallMethodOneArg(PyTuple_GET_ITEM(consumer, 0), s_register_hook, hook);
        Py_XDECREF(hook);
        int appended = handle == NULL ? -1 : PyList_Append(handles, handle);
        Py_XDECREF(handle);
        if (appended < 0)
            goto done;
    }
    rc = merged;
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

/* the output's own hook (tracker._output_hook's, into the tensor's hook dict) */
static int watch_output(PyObject *tracker, PyObject *pending, PyObject *value, PyObject *node, PyObject *through,
                        PyObject *handles)
{
    PyObject *hook = make_hook(1, tracker, pending, zero, through);
    if (hook == NULL)
        return -1;
    int rc = hook_output(value, node, hook, handles);
    Py_DECREF(hook);
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
    PyObject *result = NULL, *through = Py_NewRef(Py_None);
    int root_is_input = 0, merge = 0;
    if (set_attr(pending, s_out_count, one) < 0 || (edges = get_attr(pending, s_edges)) == NULL)
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
            outputs_left = output_nr == NULL ? NULL : get_attr(pending, s_outputs_left);
            if (outputs_left == NULL || PySet_Add(outputs_left, zero) < 0)
                goto done;
            if (PyDict_GET_SIZE(edges)) {
                PyObject *key = edge_key(node, output_nr), *found;
                found = key == NULL ? NULL : PyDict_GetItemWithError(edges, key);
                Py_XDECREF(key);
                if (found == NULL && PyErr_Occurred())
                    goto done;
                if (found != NULL)
                    Py_SETREF(through, Py_NewRef(found));
            }
            root_is_input = through != Py_None;
            if (root_is_input && add_to_attr(pending, s_contributions_left, one) < 0)
                goto done;
            /* a plain tensor out of a node of the call's own that feeds its inputs: that node's consumer hook takes the
               output's grad too (one hook instead of two); else, or when the node turns out no consumer, its own */
            merge = !root_is_input && PyDict_GET_SIZE(edges) && Py_TYPE(value) == (PyTypeObject *)tensor_type;
            if (!merge && watch_output(tracker, pending, value, node, through, handles) < 0)
                goto done;
        }
    }
    int merged = 0;
    if (PyDict_GET_SIZE(edges) && node != NULL &&
        (merged = hook_consumers(tracker, pending, edges, handles, node, root_is_input, merge ? output_nr : NULL)) < 0)
        goto done;
    if (merge && !merged && watch_output(tracker, pending, value, node, through, handles) < 0)
        goto done;
    /* kept while an output grad or an input's contribution is still to come */
    PyObject *left = get_attr(pending, s_outputs_left);
    int keep = left == NULL ? -1 : PyObject_IsTrue(left);
    Py_XDECREF(left);
    if (keep == 0) {
        PyObject *contributions = get_attr(pending, s_contributions_left);
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
    Py_DECREF(through);
    return result;
}

/* ---- the backward hooks: GradTracker._output_hook's and _consumer_hook's closures as C callables ----------------
 * OutputHook(tracker, pending, position, through)(grad) and ConsumerHook(tracker, pending, links, root=None)(grad_inputs,
 * grad_outputs) do what grad_tracker.py's on_output_grad and on_grads_sent do, line for line: the same attributes
 * of the pending record read and written, tracker._add_input_grad for a second contribution and tracker._emit when
 * the last grad came, both looked up on the tracker at each call. Both return None (the grads are not changed). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    /* ConsumerHook: `position` holds the links, `through` the root's output_nr (None: not the root's hook) */
    PyObject *tracker, *pending, *position, *through;
} hook_t;

static PyObject *s_done, *s_output_grads, *s_input_grads, *s_add_input_grad, *s_emit;

/* the truth of obj.<name> (-1 on error) */
static int attr_truth(PyObject *obj, PyObject *name)
{
    PyObject *value = get_attr(obj, name);
    if (value == NULL)
        return -1;
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

static PyObject *call_tracker(PyObject *tracker, PyObject *name, PyObject *pending, PyObject *slot, PyObject *grad)
{
    PyObject *args[4] = {tracker, pending, slot, grad};
    return PyObject_VectorcallMethod(name, args, slot == NULL ? 2 : 4, NULL);
}

/* tracker._emit(pending) (defined below) */
static PyObject *tracker_emit(PyObject *tracker, PyObject *pending);

static PyObject *output_hook_call(PyObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    hook_t *hook = (hook_t *)self;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "an output hook takes the grad");
        return NULL;
    }
    PyObject *grad = argv[0], *pending = hook->pending, *target, *done;
    int finished = attr_truth(pending, s_done);
    if (finished)
        return finished < 0 ? NULL : Py_NewRef(Py_None);
    if ((target = get_attr(pending, s_output_grads)) == NULL)
        return NULL;
    int rc = PyObject_SetItem(target, hook->position, grad);
    Py_DECREF(target);
    if (rc < 0 || (target = get_attr(pending, s_outputs_left)) == NULL)
        return NULL;
    rc = PySet_Check(target) ? PySet_Discard(target, hook->position) : -1;
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "pending.outputs_left must be a set");
    Py_DECREF(target);
    if (rc < 0)
        return NULL;
    int contributions = -2;  /* not read yet */
    if (hook->through != Py_None) {
        if ((done = call_tracker(hook->tracker, s_add_input_grad, pending, hook->through, grad)) == NULL)
            return NULL;
        Py_DECREF(done);
        if ((contributions = add_to_attr(pending, s_contributions_left, minus_one)) < 0)
            return NULL;
    }
    if ((target = get_attr(pending, s_outputs_left)) == NULL)
        return NULL;
    int left = PyObject_IsTrue(target);
    Py_DECREF(target);
    if (left < 0)
        return NULL;
    if (!left && contributions == -2) {
        if ((target = get_attr(pending, s_contributions_left)) == NULL)
            return NULL;
        contributions = PyObject_IsTrue(target);
        Py_DECREF(target);
        if (contributions < 0)
            return NULL;
    }
    if (!left && !contributions) {
        if ((done = tracker_emit(hook->tracker, pending)) == NULL)
            return NULL;
        Py_DECREF(done);
    }
    Py_RETURN_NONE;
}

static PyObject *consumer_hook_call(PyObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    hook_t *hook = (hook_t *)self;
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "a consumer hook takes (grad_inputs, grad_outputs)");
        return NULL;
    }
    PyObject *grad_inputs = argv[0], *pending = hook->pending, *links = hook->position, *input_grads, *done;
    int finished = attr_truth(pending, s_done);
    if (finished)
        return finished < 0 ? NULL : Py_NewRef(Py_None);
    if (!PyList_Check(links)) {
        PyErr_SetString(PyExc_TypeError, "a consumer hook's links must be a list");
        return NULL;
    }
    if (hook->through != Py_None) {  /* the root's hook: the grad the node received for the output is the output's */
        PyObject *grad = PyObject_GetItem(argv[1], hook->through), *target;
        if (grad == NULL)
            return NULL;
        int rc = 0;
        if (grad != Py_None) {
            rc = (target = get_attr(pending, s_output_grads)) == NULL ? -1 : PyObject_SetItem(target, zero, grad);
            Py_XDECREF(target);
            if (rc == 0) {
                rc = (target = get_attr(pending, s_outputs_left)) == NULL ? -1
                     : PySet_Check(target) ? PySet_Discard(target, zero) : -1;
                if (rc < 0 && target != NULL && !PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "pending.outputs_left must be a set");
                Py_XDECREF(target);
            }
        }
        Py_DECREF(grad);
        if (rc < 0)
            return NULL;
    }
    if ((input_grads = get_attr(pending, s_input_grads)) == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(links); i++) {
        PyObject *link = PyList_GET_ITEM(links, i);
        if (!PyTuple_Check(link) || PyTuple_GET_SIZE(link) != 2) {
            PyErr_SetString(PyExc_TypeError, "a consumer hook's links must be (index, slot) pairs");
            goto fail;
        }
        PyObject *slot = PyTuple_GET_ITEM(link, 1);
        PyObject *grad = PyObject_GetItem(grad_inputs, PyTuple_GET_ITEM(link, 0));
        if (grad == NULL)
            goto fail;
        int rc = 0;
        if (grad != Py_None) {
            int known = PySequence_Contains(input_grads, slot);
            if (known < 0) {
                rc = -1;
            } else if (known) {  /* a second contribution: summed (_add_input_grad) */
                done = call_tracker(hook->tracker, s_add_input_grad, pending, slot, grad);
                rc = done == NULL ? -1 : 0;
                Py_XDECREF(done);
            } else {
                rc = PyObject_SetItem(input_grads, slot, grad);
            }
        }
        Py_DECREF(grad);
        if (rc < 0)
            goto fail;
    }
    Py_DECREF(input_grads);
    int left = add_to_attr(pending, s_contributions_left, minus_one);
    if (left < 0)
        return NULL;
    if (!left) {
        if ((done = tracker_emit(hook->tracker, pending)) == NULL)
            return NULL;
        Py_DECREF(done);
    }
    Py_RETURN_NONE;
fail:
    Py_DECREF(input_grads);
    return NULL;
}

#define HOOK_FIELDS(X) X(tracker) X(pending) X(position) X(through)
GC_FUNCTIONS(hook, hook_t, HOOK_FIELDS)

static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kwds);

CALLABLE_TYPE(output_hook_type, hook_t, hook, "OutputHook",
              "OutputHook(tracker, pending, position, through): GradTracker._output_hook's on_output_grad.")
CALLABLE_TYPE(consumer_hook_type, hook_t, hook, "ConsumerHook",
              "ConsumerHook(tracker, pending, links, root=None): GradTracker._consumer_hook's on_grads_sent.")

static PyObject *hook_make(PyTypeObject *type, PyObject *tracker, PyObject *pending, PyObject *position,
                           PyObject *through)
{
    hook_t *hook = (hook_t *)type->tp_alloc(type, 0);
    if (hook == NULL)
        return NULL;
    hook->vectorcall = type == &output_hook_type ? output_hook_call : consumer_hook_call;
    hook->tracker = Py_NewRef(tracker);
    hook->pending = Py_NewRef(pending);
    hook->position = Py_NewRef(position);
    hook->through = Py_NewRef(through);
    return (PyObject *)hook;
}

static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    int output = type == &output_hook_type;
    PyObject *tracker, *pending, *position, *through = Py_None;
    if ((kwds != NULL && PyDict_GET_SIZE(kwds)) ||
        !PyArg_UnpackTuple(args, type->tp_name, output ? 4 : 3, 4, &tracker, &pending, &position, &through))
        return NULL;
    return hook_make(type, tracker, pending, position, through);
}

/* the tracker's factory (GradTracker._output_hook / _consumer_hook: the C hook while grad_tracker's switch holds it)
   made here where the factory is the class's own */
static PyObject *make_hook(int output, PyObject *tracker, PyObject *pending, PyObject *position, PyObject *through)
{
    PyTypeObject *type = output ? &output_hook_type : &consumer_hook_type;
    if (is_default(tracker, output ? s_output_hook : s_consumer_hook, output ? orig_output_hook : orig_consumer_hook)
        && global_is(output ? s_OutputHook : s_ConsumerHook, (PyObject *)type))
        return hook_make(type, tracker, pending, position, through != NULL ? through : Py_None);
    if (output)
        return PyObject_CallMethodObjArgs(tracker, s_output_hook, pending, position, through, NULL);
    if (through != NULL)  /* the root's consumer hook, which takes the output's grad (its output_nr) too */
        return PyObject_CallMethodObjArgs(tracker, s_consumer_hook, pending, position, through, NULL);
    return PyObject_CallMethodObjArgs(tracker, s_consumer_hook, pending, position, NULL);
}

/* collector.guard.report(name, exc) for the exception being raised, when it is an Exception (the Python paths'
 * `except Exception`): 0 (reported, the exception cleared), -1 (not an Exception, or the report raised: set). The name
 * is `name`, or `owner.backward_name` (read once the failure is fetched) when name is NULL. */
static int report_to_guard(PyObject *collector, PyObject *name, PyObject *owner)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL && value != NULL)
        PyException_SetTraceback(value, traceback);
    PyObject *guard = PyObject_GetAttr(collector, s_guard), *done = NULL;
    PyObject *key = name != NULL ? Py_NewRef(name) : guard == NULL ? NULL : PyObject_GetAttr(owner, s_backward_name);
    if (guard != NULL && key != NULL)
        done = PyObject_CallMethodObjArgs(guard, s_report, key, value != NULL ? value : Py_None, NULL);
    Py_XDECREF(key);
    Py_XDECREF(guard);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

/* ---- GradTracker._emit in C: the backward entry's grads in the call's layout, handed to collector.backward ----
 * emit(tracker, pending): what grad_tracker.py's _emit does, line for line: nothing when pending.done; else done set,
 * the grads w.r.t. the inputs laid out as the call's arguments (a list argument's items in a list, None where no
 * grad came or no grad was wanted), the grads w.r.t. the outputs by position, the pending record's grads and nodes
 * let go, then collector.backward(call, of_outputs, of_inputs) inside tracker.pause(), a failure reported by
 * collector.guard under the call's backward name. */
static PyObject *s_pause, *s_backward, *s_call, *s_args_layout, *s_kw_layout, *s_nodes, *s_collector;

/* grads.get(slot) if slot is not None else None (a new reference) */
static PyObject *grad_of(PyObject *grads, PyObject *slot)
{
    if (slot == Py_None)
        return Py_NewRef(Py_None);
    PyObject *grad = PyDict_GetItemWithError(grads, slot);
    if (grad == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    return Py_NewRef(grad);
}

/* of_inputs: each positional layout (a slot, None or a list of them), then the keyword slots */
static PyObject *inputs_of(PyObject *grads, PyObject *args_layout, PyObject *kw_layout)
{
    if (!PyDict_Check(grads) || !PyList_Check(args_layout) || !PyList_Check(kw_layout)) {
        PyErr_SetString(PyExc_TypeError, "emit: a pending record's grads and layouts must be a dict and lists");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(args_layout), k = PyList_GET_SIZE(kw_layout);
    PyObject *of_inputs = PyList_New(n + k);
    if (of_inputs == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n + k; i++) {
        PyObject *layout = i < n ? PyList_GET_ITEM(args_layout, i) : PyList_GET_ITEM(kw_layout, i - n), *item;
        if (i < n && PyList_Check(layout)) {
            Py_ssize_t m = PyList_GET_SIZE(layout);
            item = PyList_New(m);
            for (Py_ssize_t j = 0; item != NULL && j < m; j++) {
                PyObject *grad = grad_of(grads, PyList_GET_ITEM(layout, j));
                if (grad == NULL)
                    Py_CLEAR(item);
                else
                    PyList_SET_ITEM(item, j, grad);
            }
        } else {
            item = grad_of(grads, layout);
        }
        if (item == NULL) {
            Py_DECREF(of_inputs);
            return NULL;
        }
        PyList_SET_ITEM(of_inputs, i, item);
    }
    return of_inputs;
}

static int backward_fast(PyObject *collector, PyObject *call, PyObject *of_outputs, PyObject *of_inputs);

static PyObject *emit_impl(PyObject *tracker, PyObject *pending)
{
    int finished = attr_truth(pending, s_done);
    if (finished)
        return finished < 0 ? NULL : Py_NewRef(Py_None);
    if (set_attr(pending, s_done, Py_True) < 0)
        return NULL;
    PyObject *grads = NULL, *args_layout = NULL, *kw_layout = NULL, *of_inputs = NULL, *of_outputs = NULL;
    PyObject *output_grads = NULL, *count = NULL, *fresh = NULL, *call = NULL, *collector = NULL, *pause = NULL;
    PyObject *done = NULL, *result = NULL;
    if ((grads = get_attr(pending, s_input_grads)) == NULL ||
        (args_layout = get_attr(pending, s_args_layout)) == NULL ||
        (kw_layout = get_attr(pending, s_kw_layout)) == NULL ||
        (of_inputs = inputs_of(grads, args_layout, kw_layout)) == NULL ||
        (output_grads = get_attr(pending, s_output_grads)) == NULL ||
        (count = get_attr(pending, s_out_count)) == NULL)
        goto done;
    Py_ssize_t outputs = PyLong_AsSsize_t(count);
    if (outputs == -1 && PyErr_Occurred())
        goto done;
    if (outputs < 0)
        outputs = 0;  /* range() of a negative count: no item */
    if ((of_outputs = PyList_New(outputs)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < outputs; i++) {
        PyObject *position = PyLong_FromSsize_t(i), *grad;
        if (position == NULL)
            goto done;
        if (PyDict_Check(output_grads)) {
            grad = PyDict_GetItemWithError(output_grads, position);
            grad = grad != NULL ? Py_NewRef(grad) : PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        } else {
            grad = PyObject_CallMethod(output_grads, "get", "O", position);
        }
        Py_DECREF(position);
        if (grad == NULL)
            goto done;
        PyList_SET_ITEM(of_outputs, i, grad);
    }
    /* do not keep grads and graph nodes alive until the step ends */
    if ((fresh = PyDict_New()) == NULL || set_attr(pending, s_input_grads, fresh) < 0)
        goto done;
    Py_CLEAR(fresh);
    if ((fresh = PyDict_New()) == NULL || set_attr(pending, s_output_grads, fresh) < 0)
        goto done;
    Py_CLEAR(fresh);
    if ((fresh = PyList_New(0)) == NULL || set_attr(pending, s_nodes, fresh) < 0)
        goto done;
    Py_CLEAR(fresh);
    if ((call = get_attr(pending, s_call)) == NULL || (collector = PyObject_GetAttr(tracker, s_collector))
        == NULL || (pause = PyObject_CallMethodNoArgs(tracker, s_pause)) == NULL)
        goto done;
    if ((done = PyObject_CallMethodNoArgs(pause, s_enter)) == NULL)
        goto done;
    Py_CLEAR(done);
    int taken = backward_fast(collector, call, of_outputs, of_inputs);
    if (taken == 0)
        done = PyObject_CallMethodObjArgs(collector, s_backward, call, of_outputs, of_inputs, NULL);
    else
        done = taken < 0 ? NULL : Py_NewRef(Py_None);
    int failed = done == NULL && report_to_guard(collector, NULL, call) < 0;  /* raised in autograd: backward() ends */
    Py_CLEAR(done);
    {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyObject *exit_args[4] = {pause, Py_None, Py_None, Py_None};
        if (type != NULL) {
            exit_args[1] = type;
            exit_args[2] = value != NULL ? value : Py_None;
            exit_args[3] = traceback != NULL ? traceback : Py_None;
        }
        done = PyObject_VectorcallMethod(s_exit, exit_args, 4, NULL);
        if (type != NULL) {  /* the failure that left the with block wins */
            Py_XDECREF(done);
            done = NULL;
            PyErr_Restore(type, value, traceback);
            failed = 1;
        } else if (done == NULL) {
            failed = 1;
        }
        Py_CLEAR(done);
    }
    if (!failed)
        result = Py_NewRef(Py_None);
done:
    Py_XDECREF(grads); Py_XDECREF(args_layout); Py_XDECREF(kw_layout); Py_XDECREF(of_inputs); Py_XDECREF(of_outputs);
    Py_XDECREF(output_grads); Py_XDECREF(count); Py_XDECREF(fresh); Py_XDECREF(call); Py_XDECREF(collector);
    Py_XDECREF(pause);
    return result;
}

static PyObject *emit(PyObject *Py_UNUSED(self), PyObject *const *argv, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "emit(tracker, pending)");
        return NULL;
    }
    return emit_impl(argv[0], argv[1]);
}

static PyObject *tracker_emit(PyObject *tracker, PyObject *pending)
{
    PyObject *native = tracker_globals == NULL ? NULL : PyDict_GetItemWithError(tracker_globals, s_emit_native);
    if (native == NULL)
        PyErr_Clear();
    /* GradTracker._emit hands the pending record to _emit_native, this module's emit, while the switch holds it */
    if (native != NULL && PyCFunction_Check(native) && PyCFunction_GET_FUNCTION(native) == (PyCFunction)(void (*)(void))emit &&
        is_default(tracker, s_emit, orig_emit))
        return emit_impl(tracker, pending);
    return call_tracker(tracker, s_emit, pending, NULL, NULL);
}

/* DumpCollector.backward's common case in C (collector.py's method is the reference: the same checks, the same entry
 * in the same key order through the same C walks and describers, committed as _commit_entry commits it), for a
 * collector whose backward is the class's own and whose lane runs (lane_ok: the C walks, a task that admits every
 * record and keeps no tensors) and whose records name no files. 1: done (or nothing to record), 0: not taken,
 * nothing touched (the method runs), -1: failed (exception set). */
static PyObject *s_lane_ok, *s_task, *s_sink, *s_want_backward_input, *s_want_backward_output, *s_step,
    *s_parent_backward, *s_backward_name_slot, *s_is_module, *s_index, *s_backward_dot, *s_dot_backward, *s_input,
    *empty_tuple;

/* DumpCollector._commit_entry after its untrack: `entry` untracked (untrack: the collector's _untrack, None: not
 * built), put into data under `name`, `stack` into stacks (NULL: none), `parent` into construct (NULL: an L1 dump,
 * whose construct.json is empty), the collector dirty; 0 or -1 (exception set). The lane's and backward_fast's. */
static int commit_entry(PyObject *col, PyObject *untrack, PyObject *name, PyObject *entry, PyObject *stack,
                        PyObject *parent)
{
    if (untrack != Py_None) {
        PyObject *done = PyObject_CallOneArg(untrack, entry);
        if (done == NULL)
            return -1;
        Py_DECREF(done);
    }
    PyObject *const names[3] = {s_data, s_stacks, s_construct}, *const values[3] = {entry, stack, parent};
    for (int i = 0; i < 3; i++) {
        if (values[i] == NULL)
            continue;
        PyObject *target = PyObject_GetAttr(col, names[i]);
        int rc = target == NULL ? -1 : PyObject_SetItem(target, name, values[i]);
        Py_XDECREF(target);
        if (rc < 0)
            return -1;
    }
    return PyObject_SetAttr(col, s_dirty, Py_True);
}

static int backward_fast(PyObject *collector, PyObject *call, PyObject *of_outputs, PyObject *of_inputs)
{
    if (!is_default(collector, s_backward, orig_backward))
        return 0;
    int ok = attr_truth(collector, s_lane_ok);
    if (ok <= 0)
        return ok;
    PyObject *records = PyObject_GetAttr(collector, s_records), *value = NULL, *name = NULL, *entry = NULL;
    PyObject *walk = NULL, *tensor_class = NULL, *describe_tensor = NULL, *describe = NULL, *target = NULL;
    PyObject *step = NULL, *current = NULL;
    int rc = -1;
    if (records == NULL || (value = PyObject_GetAttr(records, s_on_tensor)) == NULL)
        goto done;
    if (value != Py_None) {
        rc = 0;
        goto done;
    }
    Py_CLEAR(value);
    /* if not call.dump or not self.active or call.step != self.current_step: return */
    int truth = attr_truth(call, s_dump);
    if (truth > 0)
        truth = attr_truth(collector, s_active);
    if (truth > 0) {
        if ((step = get_attr(call, s_step)) == NULL ||
            (current = PyObject_GetAttr(collector, s_current_step)) == NULL)
            goto done;
        truth = PyObject_RichCompareBool(step, current, Py_EQ);
    }
    if (truth <= 0) {
        rc = truth < 0 ? -1 : 1;
        goto done;
    }
    /* call.backward_name: the name kept in its slot, else made and kept as the property makes it */
    if ((name = get_attr(call, s_backward_name_slot)) == NULL)
        goto done;
    if (name == Py_None) {
        Py_CLEAR(name);
        PyObject *key = get_attr(call, s_key), *index = key == NULL ? NULL : get_attr(call, s_index);
        int module = index == NULL ? -1 : attr_truth(call, s_is_module);
        if (module >= 0)
            name = module ? PyUnicode_FromFormat("%U%U%S", key, s_backward_dot, index)
                          : PyUnicode_FromFormat("%U.%S%U", key, index, s_dot_backward);
        Py_XDECREF(key);
        Py_XDECREF(index);
        if (name == NULL || set_attr(call, s_backward_name_slot, name) < 0)
            goto done;
    }
    if ((entry = PyDict_New()) == NULL || (target = PyObject_GetAttr(collector, s_task)) == NULL ||
        PyObject_SetAttr(target, s_sink, empty_tuple) < 0)
        goto done;
    Py_CLEAR(target);
    if ((walk = PyObject_GetAttr(collector, s_walk_seq)) == NULL ||
        (tensor_class = PyObject_GetAttr(collector, s_tensor_class)) == NULL ||
        (describe_tensor = PyObject_GetAttr(records, s_describe_tensor)) == NULL ||
        (describe = PyObject_GetAttr(records, s_describe)) == NULL)
        goto done;
    PyObject *walk_args[4] = {NULL, tensor_class, describe_tensor, describe};
    PyObject *const wanted[2] = {s_want_backward_input, s_want_backward_output};
    PyObject *const grads[2] = {of_outputs, of_inputs}, *const keys[2] = {s_input, s_output};
    for (int i = 0; i < 2; i++) {
        int want = attr_truth(collector, wanted[i]);
        if (want < 0)
            goto done;
        if (!want)
            continue;
        walk_args[0] = grads[i];
        if ((value = PyObject_Vectorcall(walk, walk_args, 4, NULL)) == NULL || PyDict_SetItem(entry, keys[i], value) < 0)
            goto done;
        Py_CLEAR(value);
    }
    if (PyDict_GET_SIZE(entry)) {  /* _commit_entry(name, entry, call.parent_backward, None) */
        if ((value = PyObject_GetAttr(collector, s_level)) == NULL)
            goto done;
        int l1 = PyObject_RichCompareBool(value, s_l1, Py_EQ);
        Py_CLEAR(value);
        if (l1 < 0 || (!l1 && (value = get_attr(call, s_parent_backward)) == NULL) ||
            (target = PyObject_GetAttr(collector, s_untrack)) == NULL ||
            commit_entry(collector, target, name, entry, NULL, value) < 0)
            goto done;
    }
    rc = 1;
done:
    Py_XDECREF(records); Py_XDECREF(value); Py_XDECREF(name); Py_XDECREF(entry); Py_XDECREF(walk);
    Py_XDECREF(tensor_class); Py_XDECREF(describe_tensor); Py_XDECREF(describe); Py_XDECREF(target); Py_XDECREF(step);
    Py_XDECREF(current);
    return rc;
}

/* ---- the lane: a recorded API call's whole bookkeeping in one C call ------------------------------------------
 * api_hooks.ApiDumpMode.__torch_function__'s Python path (the reference) runs, for one call: DumpCollector.begin_forward, GradTracker.begin,
 * the call, DumpCollector.end_forward and GradTracker.watch_outputs, each a Python frame of attribute reads and
 * branches around C walks. For the common case (a statistics-like task that admits every record, no call filter, no
 * file stems, no RNG audit, the stack of this call site already captured) the lane does the same steps in the same
 * order with the same objects: the ForwardCall and _PendingBackward it makes are the Python classes' own instances
 * (their slots filled as their __init__ fills them), the descriptors come from the collector's describers, the
 * grad walks are begin_layout and watch_single above. Anything else is handed back, before any side effect: the
 * lane returns `reference` and the mode runs its Python path. A failure of the bookkeeping goes to collector.guard
 * as there: the call runs undumped.
 *
 * Lane(collector, tracker, forward_call, pending_type, no_subclass, grad_enabled, next_sequence_nr, reference)
 * lane(key, func, args, kwargs) -> the call's output, or `reference` (nothing done: the caller takes its own path)
 * next_sequence_nr None: no grad tracking (the mode's track_grads off).
 */
enum { FC_KEY, FC_NAME, FC_INDEX, FC_IS_MODULE, FC_DUMP, FC_ENTRY, FC_PARENT, FC_PARENT_BACKWARD, FC_LIST_MATCHED,
       FC_STACK, FC_STEP, FC_TENSORS, FC_FUNCTION, FC_BACKWARD_NAME, FC_COUNT };
static const char *const fc_names[FC_COUNT] = {"key", "name", "index", "is_module", "dump", "entry", "parent",
    "parent_backward", "list_matched", "stack", "step", "tensors", "function", "_backward_name"};
enum { PB_CALL, PB_ARGS_LAYOUT, PB_KW_LAYOUT, PB_EDGES, PB_NODES, PB_SEQ_START, PB_INPUT_GRADS, PB_OUTPUT_GRADS,
       PB_OUT_COUNT, PB_CONTRIBUTIONS_LEFT, PB_OUTPUTS_LEFT, PB_DONE, PB_COUNT };
static const char *const pb_names[PB_COUNT] = {"call", "args_layout", "kw_layout", "edges", "nodes", "seq_start",
    "input_grads", "output_grads", "out_count", "contributions_left", "outputs_left", "done"};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *collector, *tracker, *call_type, *pending_type, *no_subclass, *grad_enabled, *next_seq, *reference;
    /* the collector's fixed parts, read once: its C walks, tensor class, untrack, stack key and stack cache */
    PyObject *walk_seq, *walk_map, *tensor_class, *untrack, *stack_key, *stack_cache, *names;
    Py_ssize_t fc_offset[FC_COUNT], pb_offset[PB_COUNT];
    int construct;                      /* level != "L1": construct.json gets the parent */
    Py_ssize_t calls, fallbacks;        /* calls done here / handed back (lane.counts()) */
} lane_t;


/* the slot offsets of a __slots__ class (its member descriptors), checked to be object slots */
static int slot_offsets(PyObject *type, const char *const *names, int count, Py_ssize_t *offsets)
{
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "Lane: a class expected");
        return -1;
    }
    for (int i = 0; i < count; i++) {
        PyObject *descr = PyDict_GetItemString(((PyTypeObject *)type)->tp_dict, names[i]); /* borrowed */
        if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type ||
            ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "Lane: %s.%s is not a slot", ((PyTypeObject *)type)->tp_name, names[i]);
            return -1;
        }
        offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    return 0;
}

/* a new instance of a __slots__ class with its slots set to `values` (new references, stolen; NULL ones fail) */
static PyObject *filled(PyObject *type, const Py_ssize_t *offsets, PyObject **values, int count)
{
    PyObject *obj = NULL;
    for (int i = 0; i < count; i++)
        if (values[i] == NULL)
            goto fail;
    obj = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    if (obj == NULL)
        goto fail;
    for (int i = 0; i < count; i++)
        *(PyObject **)((char *)obj + offsets[i]) = values[i];
    return obj;
fail:
    for (int i = 0; i < count; i++)
        Py_XDECREF(values[i]);
    return NULL;
}

/* manager.__exit__(None, None, None), an exception already set kept as it is (0, or -1 with an exception set) */
static int leave_context(PyObject *manager)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *args[4] = {manager, Py_None, Py_None, Py_None};
    PyObject *done = PyObject_VectorcallMethod(s_exit, args, 4, NULL);
    if (type != NULL) {  /* the earlier failure wins */
        Py_XDECREF(done);
        PyErr_Restore(type, value, traceback);
        return -1;
    }
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

/* manager.__enter__(): 0, or -1 with an exception set */
static int enter_context(PyObject *manager)
{
    PyObject *done = PyObject_CallMethodNoArgs(manager, s_enter);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

static PyObject *call_function(PyObject *func, PyObject *args, PyObject *kwargs)
{
    return PyObject_Call(func, args, kwargs != Py_None && PyDict_GET_SIZE(kwargs) ? kwargs : NULL);
}

/* what the bookkeeping before the call made: the ForwardCall, its entry and stack, the pending backward or NULL */
typedef struct {
    PyObject *records, *call, *entry, *stack, *name, *parent, *pending, *walk, *describe_tensor, *describe;
} lane_call_t;

static void lane_call_clear(lane_call_t *c)
{
    Py_CLEAR(c->records); Py_CLEAR(c->call); Py_CLEAR(c->entry); Py_CLEAR(c->stack); Py_CLEAR(c->name);
    Py_CLEAR(c->parent); Py_CLEAR(c->pending); Py_CLEAR(c->walk); Py_CLEAR(c->describe_tensor);
    Py_CLEAR(c->describe);
}

/* "{key}.{index}.forward", made once a process for each key and index: `names` (the lane's, shared by the lanes of
   every window) maps a key to the list of its names by index; a step's calls of one key count 0, 1, 2... */
static PyObject *forward_name(PyObject *names, PyObject *key, PyObject *index)
{
    Py_ssize_t at = PyLong_AsSsize_t(index);
    if (at == -1 && PyErr_Occurred())
        return NULL;
    PyObject *known = PyDict_GetItemWithError(names, key);
    if (known == NULL && PyErr_Occurred())
        return NULL;
    if (known != NULL && PyList_CheckExact(known) && at >= 0 && at < PyList_GET_SIZE(known))
        return Py_NewRef(PyList_GET_ITEM(known, at));
    PyObject *name = PyUnicode_FromFormat("%U.%S%U", key, index, s_forward_suffix);
    if (name == NULL)
        return NULL;
    if (known == NULL && at == 0) {
        PyObject *list = PyList_New(0);
        int failed = list == NULL || PyDict_SetItem(names, key, list) < 0;
        known = failed ? NULL : list;
        Py_XDECREF(list);  /* the dict holds it */
        if (failed) {
            Py_DECREF(name);
            return NULL;
        }
    }
    if (known != NULL && PyList_CheckExact(known) && at == PyList_GET_SIZE(known) && PyList_Append(known, name) < 0) {
        Py_DECREF(name);
        return NULL;
    }
    return name;
}

/* 1: not for the lane (nothing changed); 0: c filled; -1: failed (exception set) */
static int lane_begin(lane_t *lane, PyObject *key, PyObject *func, PyObject *args, PyObject *kwargs, lane_call_t *c)
{
    PyObject *col = lane->collector, *value = NULL, *tensor_class = NULL, *walk_map = NULL;
    int rc = -1;
    if ((c->records = PyObject_GetAttr(col, s_records)) == NULL || (value = PyObject_GetAttr(c->records, s_on_tensor))
        == NULL)
        return -1;
    if (value != Py_None || !PyUnicode_CheckExact(key) || !PyTuple_CheckExact(args) ||
        (kwargs != Py_None && !PyDict_CheckExact(kwargs))) {
        Py_DECREF(value);
        return 1;
    }
    Py_CLEAR(value);
    /* the stack: the capture's cache by the C key of the caller's frames (begin_forward's lookup) */
    PyObject *frame = (PyObject *)PyEval_GetFrame();
    if (frame == NULL || lane->stack_key == Py_None || !PyDict_Check(lane->stack_cache))
        return 1;
    if ((value = PyObject_CallOneArg(lane->stack_key, frame)) == NULL)
        return -1;
    c->stack = PyDict_GetItemWithError(lane->stack_cache, value);
    Py_XINCREF(c->stack);
    Py_DECREF(value);
    value = NULL;
    if (c->stack == NULL) {  /* a call site not seen yet: captured (capture(1): the caller of the lane, as the key) */
        if (PyErr_Occurred())
            return -1;
        PyObject *capture = PyObject_GetAttr(col, s_stack_capture);
        if (capture == NULL)
            return -1;
        c->stack = PyObject_CallMethodOneArg(capture, s_capture, one);
        Py_DECREF(capture);
        if (c->stack == NULL)
            return -1;
        if (c->stack == Py_None) {
            Py_CLEAR(c->stack);
            return 1;
        }
    }
    /* the name: the key's count this step */
    PyObject *counters = PyObject_GetAttr(col, s_counters), *index = NULL, *module_stack = NULL, *step = NULL;
    PyObject *parent_backward = NULL;
    if (counters == NULL)
        return -1;
    if (!PyDict_Check(counters)) {
        Py_DECREF(counters);
        return 1;
    }
    if ((index = PyDict_GetItemWithError(counters, key)) == NULL) {
        if (PyErr_Occurred())
            goto done;
        index = zero;
    }
    Py_INCREF(index);
    if ((value = PyNumber_Add(index, one)) == NULL || PyDict_SetItem(counters, key, value) < 0)
        goto done;
    Py_CLEAR(value);
    if ((module_stack = PyObject_GetAttr(col, s_module_stack)) == NULL ||
        (step = PyObject_GetAttr(col, s_current_step)) == NULL)
        goto done;
    if (PyList_Check(module_stack) && PyList_GET_SIZE(module_stack)) {
        PyObject *parent = PyList_GET_ITEM(module_stack, PyList_GET_SIZE(module_stack) - 1);
        Py_INCREF(parent);
        c->parent = PyObject_GetAttr(parent, s_name);
        parent_backward = c->parent == NULL ? NULL : PyObject_GetAttr(parent, s_backward_name);
        Py_DECREF(parent);
        if (parent_backward == NULL)
            goto done;
    } else if (!PyList_Check(module_stack)) {
        PyErr_SetString(PyExc_TypeError, "collector.module_stack must be a list");
        goto done;
    } else {
        c->parent = Py_NewRef(Py_None);
        parent_backward = Py_NewRef(Py_None);
    }
    if ((c->name = forward_name(lane->names, key, index)) == NULL || (c->entry = PyDict_New()) == NULL)
        goto done;
    {
        PyObject *values[FC_COUNT] = {Py_NewRef(key), Py_NewRef(c->name), Py_NewRef(index), Py_NewRef(Py_False),
                                      Py_NewRef(Py_True), Py_NewRef(c->entry), Py_NewRef(c->parent),
                                      Py_NewRef(parent_backward), Py_NewRef(Py_False), Py_NewRef(c->stack),
                                      Py_NewRef(step), PyTuple_New(0), Py_NewRef(func), Py_NewRef(Py_None)};
        if ((c->call = filled(lane->call_type, lane->fc_offset, values, FC_COUNT)) == NULL)
            goto done;
    }
    /* the inputs' descriptors (begin_forward's C walks) */
    c->walk = Py_NewRef(lane->walk_seq);
    walk_map = Py_NewRef(lane->walk_map);
    tensor_class = Py_NewRef(lane->tensor_class);
    if ((c->describe_tensor = PyObject_GetAttr(c->records, s_describe_tensor)) == NULL ||
        (c->describe = PyObject_GetAttr(c->records, s_describe)) == NULL)
        goto done;
    {
        PyObject *walk_args[4] = {args, tensor_class, c->describe_tensor, c->describe};
        if ((value = PyObject_Vectorcall(c->walk, walk_args, 4, NULL)) == NULL ||
            PyDict_SetItem(c->entry, s_input_args, value) < 0)
            goto done;
        Py_CLEAR(value);
        if (kwargs == Py_None || !PyDict_GET_SIZE(kwargs)) {
            value = PyDict_New();
        } else {
            walk_args[0] = kwargs;
            value = PyObject_Vectorcall(walk_map, walk_args, 4, NULL);
        }
        if (value == NULL || PyDict_SetItem(c->entry, s_input_kwargs, value) < 0)
            goto done;
        Py_CLEAR(value);
    }
    /* GradTracker.begin: the inputs' gradient edges */
    if (lane->next_seq != Py_None) {
        if ((value = PyObject_CallNoArgs(lane->grad_enabled)) == NULL)
            goto done;
        int enabled = PyObject_IsTrue(value);
        Py_CLEAR(value);
        if (enabled < 0)
            goto done;
        if (enabled) {
            PyObject *leaf_edges = PyObject_GetAttr(lane->tracker, s_leaf_edges), *layouts = NULL, *seq = NULL;
            PyObject *edges = PyDict_New(), *nodes = PyList_New(0);
            if (leaf_edges != NULL && edges != NULL && nodes != NULL) {
                PyObject *walk_args[5] = {args, kwargs, leaf_edges, edges, nodes};
                layouts = begin_layout(NULL, walk_args, 5);
            }
            if (layouts != NULL)
                seq = PyObject_CallNoArgs(lane->next_seq);
            Py_XDECREF(leaf_edges);
            if (seq == NULL || !PyTuple_CheckExact(layouts) || PyTuple_GET_SIZE(layouts) != 2) {
                Py_XDECREF(layouts);
                Py_XDECREF(seq);
                Py_XDECREF(edges);
                Py_XDECREF(nodes);
                goto done;
            }
            PyObject *values[PB_COUNT] = {Py_NewRef(c->call), Py_NewRef(PyTuple_GET_ITEM(layouts, 0)),
                                          Py_NewRef(PyTuple_GET_ITEM(layouts, 1)), edges, nodes, seq, PyDict_New(),
                                          PyDict_New(), Py_NewRef(zero), Py_NewRef(zero), PySet_New(NULL),
                                          Py_NewRef(Py_False)};
            Py_DECREF(layouts);
            if ((c->pending = filled(lane->pending_type, lane->pb_offset, values, PB_COUNT)) == NULL)
                goto done;
        }
    }
    rc = 0;
done:
    Py_XDECREF(counters);
    Py_XDECREF(index);
    Py_XDECREF(value);
    Py_XDECREF(module_stack);
    Py_XDECREF(step);
    Py_XDECREF(parent_backward);
    Py_XDECREF(tensor_class);
    Py_XDECREF(walk_map);
    return rc;
}

/* end_forward and watch_outputs; 0 or -1 (exception set) */
static int lane_end(lane_t *lane, lane_call_t *c, PyObject *output)
{
    PyObject *col = lane->collector, *value = NULL, *tensor_class = NULL, *target = NULL;
    int rc = -1;
    int active = attr_truth(col, s_active);
    if (active < 0)
        return -1;
    tensor_class = Py_NewRef(lane->tensor_class);
    int single = Py_TYPE(output) == (PyTypeObject *)tensor_class ? 1 : PyObject_IsInstance(output, tensor_class);
    if (single < 0)
        goto done;
    if (!active)  /* stopped meanwhile: end_forward records nothing, the grads are still watched */
        goto watch;
    if (single || PyList_Check(output) || PyTuple_Check(output)) {
        PyObject *items = single ? PyTuple_Pack(1, output) : Py_NewRef(output);
        PyObject *walk_args[4] = {items, tensor_class, c->describe_tensor, c->describe};
        value = items == NULL ? NULL : PyObject_Vectorcall(c->walk, walk_args, 4, NULL);
        Py_XDECREF(items);
    } else {
        value = PyObject_CallMethodObjArgs(c->records, s_describe_output, output, Py_None, NULL);
    }
    if (value == NULL || PyDict_SetItem(c->entry, s_output, value) < 0)
        goto done;
    Py_CLEAR(value);
    if (commit_entry(col, lane->untrack, c->name, c->entry, c->stack, lane->construct ? c->parent : NULL) < 0)
        goto done;
watch:
    if (c->pending != NULL) {
        if (single) {
            PyObject *watch_args[3] = {lane->tracker, c->pending, output};
            value = watch_single(NULL, watch_args, 3);
        } else {
            value = PyObject_CallMethodObjArgs(lane->tracker, s_watch_outputs, c->pending, output, NULL);
        }
        if (value == NULL)
            goto done;
        Py_CLEAR(value);
    }
    rc = 0;
done:
    Py_XDECREF(value);
    Py_XDECREF(target);
    Py_XDECREF(tensor_class);
    return rc;
}

static PyObject *lane_vectorcall(PyObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    lane_t *lane = (lane_t *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 4 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "lane(key, func, args, kwargs)");
        return NULL;
    }
    PyObject *key = argv[0], *func = argv[1], *args = argv[2], *kwargs = argv[3], *output = NULL;
    lane_call_t c = {0};
    /* one DisableTorchFunctionSubclass around the bookkeeping before the call and again after it (it keeps the
       state it found at each __enter__, so one object serves both) */
    PyObject *manager = PyObject_CallNoArgs(lane->no_subclass);
    if (manager == NULL || enter_context(manager) < 0)
        goto done;
    int begun = lane_begin(lane, key, func, args, kwargs, &c);
    int left = leave_context(manager);  /* a failure of the bookkeeping stays set for the report below */
    if (begun >= 0 && left < 0)
        goto done;
    if (begun == 1) {  /* not for the lane: the caller takes the reference path, from the start */
        lane->fallbacks++;
        output = Py_NewRef(lane->reference);
        goto done;
    }
    if (begun < 0) {  /* the bookkeeping failed: reported, the call runs undumped */
        if (report_to_guard(lane->collector, key, NULL) == 0)
            output = call_function(func, args, kwargs);
        goto done;
    }
    lane->calls++;
    if ((output = call_function(func, args, kwargs)) == NULL || enter_context(manager) < 0)
        goto failed;
    int ended = lane_end(lane, &c, output);
    left = leave_context(manager);  /* with the end's failure still set: left as it is, then reported */
    if ((ended < 0 && report_to_guard(lane->collector, key, NULL) < 0) || (ended == 0 && left < 0))
        goto failed;
    goto done;
failed:
    Py_CLEAR(output);
done:
    Py_XDECREF(manager);
    lane_call_clear(&c);
    return output;
}

#define LANE_FIELDS(X) X(collector) X(tracker) X(call_type) X(pending_type) X(no_subclass) X(grad_enabled) \
    X(next_seq) X(reference) X(walk_seq) X(walk_map) X(tensor_class) X(untrack) \
    X(stack_key) X(stack_cache) X(names)

GC_FUNCTIONS(lane, lane_t, LANE_FIELDS)

static PyObject *lane_counts(PyObject *self, PyObject *Py_UNUSED(args))
{
    lane_t *lane = (lane_t *)self;
    return Py_BuildValue("(nn)", lane->calls, lane->fallbacks);
}

static PyMethodDef lane_methods[] = {
    {"counts", lane_counts, METH_NOARGS, "counts() -> (calls recorded here, calls handed back)"},
    {NULL, NULL, 0, NULL},
};

static PyObject *lane_new(PyTypeObject *type, PyObject *args, PyObject *kwds);

CALLABLE_TYPE(lane_type, lane_t, lane, "Lane",
              "Lane(collector, tracker, forward_call, pending_type, no_subclass, grad_enabled, next_sequence_nr, "
              "reference): lane(key, func, args, kwargs) records one API call as ApiDumpMode's Python path does.",
              .tp_methods = lane_methods)

static PyObject *lane_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *collector, *tracker, *call_type, *pending_type, *no_subclass, *grad_enabled, *next_seq, *reference;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Lane takes positional arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "Lane", 8, 8, &collector, &tracker, &call_type, &pending_type, &no_subclass,
                           &grad_enabled, &next_seq, &reference))
        return NULL;
    if (tensor_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "Lane: configure() first");
        return NULL;
    }
    lane_t *lane = (lane_t *)type->tp_alloc(type, 0);
    if (lane == NULL)
        return NULL;
    lane->vectorcall = lane_vectorcall;
    lane->collector = Py_NewRef(collector);
    lane->tracker = Py_NewRef(tracker);
    lane->call_type = Py_NewRef(call_type);
    lane->pending_type = Py_NewRef(pending_type);
    lane->no_subclass = Py_NewRef(no_subclass);
    lane->grad_enabled = Py_NewRef(grad_enabled);
    lane->next_seq = Py_NewRef(next_seq);
    lane->reference = Py_NewRef(reference);
    PyObject *level = NULL;
    if ((lane->walk_seq = PyObject_GetAttr(collector, s_walk_seq)) == NULL ||
        (lane->walk_map = PyObject_GetAttr(collector, s_walk_map)) == NULL ||
        (lane->tensor_class = PyObject_GetAttr(collector, s_tensor_class)) == NULL ||
        (lane->untrack = PyObject_GetAttr(collector, s_untrack)) == NULL ||
        (lane->stack_key = PyObject_GetAttr(collector, s_stack_key)) == NULL ||
        (lane->stack_cache = PyObject_GetAttr(collector, s_stack_cache)) == NULL ||
        (lane->names = PyObject_GetAttr(collector, s_lane_names)) == NULL ||
        (!PyDict_CheckExact(lane->names) && !PyErr_Format(PyExc_TypeError, "Lane: collector._lane_names must be a dict")) ||
        slot_offsets(call_type, fc_names, FC_COUNT, lane->fc_offset) < 0 ||
        slot_offsets(pending_type, pb_names, PB_COUNT, lane->pb_offset) < 0 ||
        (level = PyObject_GetAttr(collector, s_level)) == NULL) {
        Py_DECREF(lane);
        return NULL;
    }
    int l1 = PyObject_RichCompareBool(level, s_l1, Py_EQ);
    Py_DECREF(level);
    if (l1 < 0) {
        Py_DECREF(lane);
        return NULL;
    }
    lane->construct = !l1;
    return (PyObject *)lane;
}

/* ---- the mode's __torch_function__ in C ------------------------------------------------------------------------
 * ModeEntry(lane, mode, mark, table, record, python_tf), set as the mode instance's own
 * __torch_function__ (torch calls it with (func, types, args, kwargs); `__self__` is the mode, as torch asks of a
 * mode's method): what ApiDumpMode.__torch_function__ does, with no Python frame: the call's key from the operator
 * mark (taken and cleared) or the API table (an unhashable function: no key), the call itself when it has no key,
 * the mode is silenced or the collector inactive, else the lane, and mode.record(key, func, args, kwargs) (the
 * Python path) for what the lane hands back. Any other calling convention goes to python_tf, the class's method. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *lane, *mode, *mark, *table, *record, *python_tf;  /* the collector and `reference`: the lane's */
} entry_t;


static PyObject *entry_vectorcall(PyObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    entry_t *entry = (entry_t *)self;
    lane_t *lane = (lane_t *)entry->lane;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || nargs < 2 || nargs > 4 || (nargs > 2 && !PyTuple_Check(argv[2])) ||
        (nargs > 3 && argv[3] != Py_None && !PyDict_Check(argv[3])))
        return PyObject_Vectorcall(entry->python_tf, argv, nargsf, kwnames);
    PyObject *func = argv[0], *args = nargs > 2 ? argv[2] : NULL, *kwargs = nargs > 3 ? argv[3] : Py_None;
    PyObject *empty = NULL, *key, *output;
    if (args == NULL && (args = empty = PyTuple_New(0)) == NULL)
        return NULL;
    if ((key = PyObject_GetAttr(entry->mark, s_key)) == NULL)
        goto fail;
    if (key != Py_None) {
        if (PyObject_SetAttr(entry->mark, s_key, Py_None) < 0)
            goto fail_key;
    } else {
        Py_DECREF(key);
        if (PyDict_CheckExact(entry->table)) {
            key = PyDict_GetItemWithError(entry->table, func);
            Py_XINCREF(key);
        } else {
            key = PyObject_CallMethod(entry->table, "get", "O", func);
        }
        if (key == NULL) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {  /* no key; unhashable: no key */
                PyErr_Clear();
                key = Py_NewRef(Py_None);
            } else {
                goto fail;
            }
        }
    }
    int recorded = key != Py_None;
    if (recorded) {
        int silenced = attr_truth(entry->mode, s_silenced);
        if (silenced < 0)
            goto fail_key;
        recorded = !silenced;
    }
    if (recorded) {
        int active = attr_truth(lane->collector, s_active);
        if (active < 0)
            goto fail_key;
        recorded = active;
    }
    if (!recorded) {
        Py_DECREF(key);
        output = call_function(func, args, kwargs);
        Py_XDECREF(empty);
        return output;
    }
    PyObject *lane_args[4] = {key, func, args, kwargs};
    output = lane_vectorcall(entry->lane, lane_args, 4, NULL);
    if (output == lane->reference) {  /* handed back: the Python path */
        Py_DECREF(output);
        PyObject *fresh = NULL;
        if (kwargs == Py_None && (kwargs = fresh = PyDict_New()) == NULL)
            goto fail_key;
        PyObject *record_args[4] = {key, func, args, kwargs};
        output = PyObject_Vectorcall(entry->record, record_args, 4, NULL);
        Py_XDECREF(fresh);
    }
    Py_DECREF(key);
    Py_XDECREF(empty);
    return output;
fail_key:
    Py_DECREF(key);
fail:
    Py_XDECREF(empty);
    return NULL;
}

#define ENTRY_FIELDS(X) X(lane) X(mode) X(mark) X(table) X(record) X(python_tf)

GC_FUNCTIONS(entry, entry_t, ENTRY_FIELDS)

static PyObject *entry_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fields[6];
    if ((kwds != NULL && PyDict_GET_SIZE(kwds)) ||
        !PyArg_UnpackTuple(args, "ModeEntry", 6, 6, &fields[0], &fields[1], &fields[2], &fields[3], &fields[4],
                           &fields[5]))
        return NULL;
    if (Py_TYPE(fields[0]) != &lane_type) {
        PyErr_SetString(PyExc_TypeError, "ModeEntry: a Lane first");
        return NULL;
    }
    entry_t *entry = (entry_t *)type->tp_alloc(type, 0);
    if (entry == NULL)
        return NULL;
    entry->vectorcall = entry_vectorcall;
    PyObject **slots[6] = {&entry->lane, &entry->mode, &entry->mark, &entry->table, &entry->record, &entry->python_tf};
    for (int i = 0; i < 6; i++)
        *slots[i] = Py_NewRef(fields[i]);
    return (PyObject *)entry;
}

static PyMemberDef entry_members[] = {
    {"__self__", T_OBJECT, offsetof(entry_t, mode), READONLY, "the mode (torch asks a mode's method for it)"},
    {NULL, 0, 0, 0, NULL},
};

CALLABLE_TYPE(entry_type, entry_t, entry, "ModeEntry",
              "ModeEntry(lane, mode, mark, table, record, python_tf): the mode's __torch_function__ "
              "(ApiDumpMode's Python method is the reference).",
              .tp_members = entry_members)

/* a `finally` block in C: error_save() takes the exception being raised (if any) aside, the cleanup runs, and
   error_resume(saved, cleanup_failed) sets the saved exception again, or drops it when the cleanup failed (its own
   exception replaces it, as in Python); -1 when the cleanup failed */
typedef struct {
    PyObject *type, *value, *traceback;
} saved_error_t;

static void error_save(saved_error_t *saved)
{
    PyErr_Fetch(&saved->type, &saved->value, &saved->traceback);
}

static int error_resume(saved_error_t *saved, int cleanup_failed)
{
    if (cleanup_failed) {
        Py_XDECREF(saved->type);
        Py_XDECREF(saved->value);
        Py_XDECREF(saved->traceback);
        return -1;
    }
    PyErr_Restore(saved->type, saved->value, saved->traceback);
    return 0;
}

/* ---- MarkedOperator: api_hooks._marking's wrapper in C ------------------------------------------------------------
 * MarkedOperator(key, operator, mark): a Tensor operator (Tensor.__mul__...) that sets mark.key = key, calls
 * operator(*args, **kwargs) and sets mark.key back to None, also when the call raised; the API mode names the
 * __torch_function__ call the operator makes from the mark. It binds as a function does (a method of the class it
 * is set on), so `a * b` and `a.__mul__(b)` reach it with the tensor first. api_hooks.py's closure is the reference. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *key, *operator, *mark, *name;
} marked_t;

static PyObject *marked_call(PyObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    marked_t *m = (marked_t *)self;
    if (PyObject_SetAttr(m->mark, s_key, m->key) < 0)
        return NULL;
    PyObject *result = PyObject_Vectorcall(m->operator, argv, nargsf, kwnames);
    saved_error_t saved;
    error_save(&saved);
    if (error_resume(&saved, PyObject_SetAttr(m->mark, s_key, Py_None) < 0) < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    return result;
}

static PyObject *marked_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *marked_name(PyObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(((marked_t *)self)->name);
}

static PyObject *marked_doc(PyObject *self, void *Py_UNUSED(closure))
{
    PyObject *doc = PyObject_GetAttrString(((marked_t *)self)->operator, "__doc__");
    if (doc == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        doc = Py_NewRef(Py_None);
    }
    return doc;
}

static PyGetSetDef marked_getset[] = {
    {"__name__", marked_name, NULL, "the operator's name", NULL},
    {"__doc__", marked_doc, NULL, "the operator's doc", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef marked_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(marked_t, operator), READONLY, "the operator"},
    {"key", T_OBJECT, offsetof(marked_t, key), READONLY, "the name the call gets (Tensor.__mul__)"},
    {NULL, 0, 0, 0, NULL},
};

#define MARKED_FIELDS(X) X(key) X(operator) X(mark) X(name)
GC_FUNCTIONS(marked, marked_t, MARKED_FIELDS)

static PyObject *marked_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *key, *operator, *mark;
    if ((kwds != NULL && PyDict_GET_SIZE(kwds)) || !PyArg_UnpackTuple(args, "MarkedOperator", 3, 3, &key, &operator,
                                                                      &mark))
        return NULL;
    if (!PyCallable_Check(operator)) {
        PyErr_SetString(PyExc_TypeError, "MarkedOperator: the operator must be callable");
        return NULL;
    }
    PyObject *name = PyObject_GetAttrString(operator, "__name__");
    if (name == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        name = Py_NewRef(key);
    }
    marked_t *m = (marked_t *)type->tp_alloc(type, 0);
    if (m == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    m->vectorcall = marked_call;
    m->key = Py_NewRef(key);
    m->operator = Py_NewRef(operator);
    m->mark = Py_NewRef(mark);
    m->name = name;
    return (PyObject *)m;
}

GC_TYPE(marked_type, marked_t, marked, "MarkedOperator", "MarkedOperator(key, operator, mark): api_hooks._marking's wrapper.",
        Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR, .tp_call = PyVectorcall_Call,
        .tp_vectorcall_offset = offsetof(marked_t, vectorcall), .tp_descr_get = marked_get,
        .tp_getset = marked_getset, .tp_members = marked_members)

/* ---- Paused: dump_session._Paused in C ---------------------------------------------------------------------------
 * Paused(reentrancy): a context manager for our own work inside hooks: inside the reentrancy guard (Reentrancy.enter
 * and leave: its thread-local `depth` counted up and down) and torch functions off (torch._C.DisableTorchFunction,
 * configured), both restored on exit, also when the work raised. dump_session.py's _Paused is the reference. */
typedef struct {
    PyObject_HEAD
    PyObject *local, *off;
} paused_t;

static PyObject *disable_torch_function, *s_depth, *s_local_attr;

/* local.depth += delta (a missing depth counts as 0 going up, as Reentrancy.enter's getattr default) */
static int add_depth(PyObject *local, long delta)
{
    PyObject *depth = PyObject_GetAttr(local, s_depth), *sum;
    if (depth == NULL) {
        if (delta < 0 || !PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        depth = Py_NewRef(zero);
    }
    sum = PyNumber_Add(depth, delta > 0 ? one : minus_one);
    Py_DECREF(depth);
    if (sum == NULL)
        return -1;
    int rc = PyObject_SetAttr(local, s_depth, sum);
    Py_DECREF(sum);
    return rc;
}

static PyObject *paused_enter(PyObject *self, PyObject *Py_UNUSED(args))
{
    paused_t *p = (paused_t *)self;
    if (add_depth(p->local, 1) < 0)
        return NULL;
    PyObject *done = PyObject_CallMethodNoArgs(p->off, s_enter);
    if (done == NULL) {  /* leave the guard again, the failure kept */
        saved_error_t saved;
        error_save(&saved);
        error_resume(&saved, add_depth(p->local, -1) < 0);
        return NULL;
    }
    Py_DECREF(done);
    return Py_NewRef(self);
}

static PyObject *paused_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    paused_t *p = (paused_t *)self;
    PyObject *exit = PyObject_GetAttr(p->off, s_exit), *done = NULL;
    if (exit != NULL) {
        done = PyObject_Vectorcall(exit, args, nargs, NULL);
        Py_DECREF(exit);
    }
    /* finally: the guard left; a failure there replaces the earlier one, as in the Python class */
    saved_error_t saved;
    error_save(&saved);
    if (error_resume(&saved, add_depth(p->local, -1) < 0) < 0 || done == NULL) {
        Py_XDECREF(done);
        return NULL;
    }
    Py_DECREF(done);
    Py_RETURN_FALSE;
}

#define PAUSED_FIELDS(X) X(local) X(off)
GC_FUNCTIONS(paused, paused_t, PAUSED_FIELDS)

static PyObject *paused_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *reentrancy;
    if ((kwds != NULL && PyDict_GET_SIZE(kwds)) || !PyArg_UnpackTuple(args, "Paused", 1, 1, &reentrancy))
        return NULL;
    if (disable_torch_function == NULL) {
        PyErr_SetString(PyExc_TypeError, "Paused: configure_defaults() first");
        return NULL;
    }
    PyObject *local = PyObject_GetAttr(reentrancy, s_local_attr);
    PyObject *off = local == NULL ? NULL : PyObject_CallNoArgs(disable_torch_function);
    paused_t *p = off == NULL ? NULL : (paused_t *)type->tp_alloc(type, 0);
    if (p == NULL) {
        Py_XDECREF(local);
        Py_XDECREF(off);
        return NULL;
    }
    p->local = local;
    p->off = off;
    return (PyObject *)p;
}

static PyMethodDef paused_methods[] = {
    {"__enter__", paused_enter, METH_NOARGS, "inside the reentrancy guard, torch functions off"},
    {"__exit__", (PyCFunction)(void (*)(void))paused_exit, METH_FASTCALL, "both restored"},
    {NULL, NULL, 0, NULL},
};

GC_TYPE(paused_type, paused_t, paused, "Paused",
        "Paused(reentrancy): dump_session._Paused (our own work inside hooks: not recorded).", 0,
        .tp_methods = paused_methods)

/* ---- register_node_hook: torch's Node hook registration, without its Python handle for the consumer hooks ----------
 * torch registers a hook on an autograd node (node.register_hook) by calling torch.autograd.function's
 * _HookMixin._register_hook(backward_hooks, hook) -> (the node's hook dict, a handle): a Python frame, an
 * OrderedDict made the first time and a RemovableHandle (another frame, a weak reference, a global counter) for
 * every hook. The dump session puts this function in its place for the window (nothing else changes: the hook goes
 * into the same dict, which torch calls the same way); for a ConsumerHook it keys the hook by itself and hands back
 * (dict, hook) as the handle, which GradTracker.remove pops, as it does for the outputs' hooks; every other hook
 * (the user's, in the window) goes to torch's own function. */
static PyObject *register_node_hook(PyObject *Py_UNUSED(self), PyObject *const *argv, Py_ssize_t nargs)
{
    if (register_original == NULL) {
        PyErr_SetString(PyExc_TypeError, "register_node_hook: configure_defaults() first");
        return NULL;
    }
    if (nargs != 2 || Py_TYPE(argv[1]) != &consumer_hook_type ||
        (argv[0] != Py_None && !PyObject_TypeCheck(argv[0], (PyTypeObject *)ordered_dict)))
        return PyObject_Vectorcall(register_original, argv, nargs, NULL);
    PyObject *hooks = argv[0] == Py_None ? PyObject_CallNoArgs(ordered_dict) : Py_NewRef(argv[0]), *handle = NULL;
    PyObject *result = NULL;
    if (hooks != NULL && PyObject_SetItem(hooks, argv[1], argv[1]) == 0 &&
        (handle = PyTuple_Pack(2, hooks, argv[1])) != NULL)
        result = PyTuple_Pack(2, hooks, handle);
    Py_XDECREF(handle);
    Py_XDECREF(hooks);
    return result;
}

/* remove_handles(handles): GradTracker.remove's loop: a (hook dict, key) pair popped from its dict (a key already
 * gone is no error), anything else's remove() called */
static PyObject *s_remove;

static PyObject *remove_handles(PyObject *Py_UNUSED(self), PyObject *handles)
{
    PyObject *items = PySequence_Fast(handles, "remove_handles: a list of handles");
    if (items == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); i++) {
        PyObject *handle = PySequence_Fast_GET_ITEM(items, i), *done;
        if (PyTuple_CheckExact(handle) && PyTuple_GET_SIZE(handle) == 2) {
            if (PyObject_DelItem(PyTuple_GET_ITEM(handle, 0), PyTuple_GET_ITEM(handle, 1)) < 0) {
                if (!PyErr_ExceptionMatches(PyExc_KeyError))
                    goto fail;
                PyErr_Clear();
            }
        } else {
            if ((done = PyObject_CallMethodNoArgs(handle, s_remove)) == NULL)
                goto fail;
            Py_DECREF(done);
        }
    }
    Py_DECREF(items);
    Py_RETURN_NONE;
fail:
    Py_DECREF(items);
    return NULL;
}

/* each module global slots[i] set to a new reference to values[i] (the one it held let go) */
static void store_all(PyObject **const *slots, PyObject *const *values, int count)
{
    for (int i = 0; i < count; i++)
        Py_XSETREF(*slots[i], Py_NewRef(values[i]));
}

static PyObject *configure_defaults(PyObject *Py_UNUSED(self), PyObject *const *argv, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyDict_Check(argv[0]) || !PyType_Check(argv[1]) || !PyType_Check(argv[2]) ||
        !PyCallable_Check(argv[3]) || !PyCallable_Check(argv[4])) {
        PyErr_SetString(PyExc_TypeError, "configure_defaults(tracker_globals, tracker_type, collector_type, "
                                         "register_hook, disable_torch_function, pending_type, call_type)");
        return NULL;
    }
    if (register_slots(&slot_classes[0], argv[5]) < 0 || register_slots(&slot_classes[1], argv[6]) < 0)
        return NULL;
    PyObject *tracker_dict = ((PyTypeObject *)argv[1])->tp_dict, *collector_dict = ((PyTypeObject *)argv[2])->tp_dict;
    PyObject *found[4] = {PyDict_GetItemWithError(tracker_dict, s_output_hook),
                          PyDict_GetItemWithError(tracker_dict, s_consumer_hook),
                          PyDict_GetItemWithError(tracker_dict, s_emit),
                          PyDict_GetItemWithError(collector_dict, s_backward)};
    for (int i = 0; i < 4; i++) {
        if (found[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "configure_defaults: a method the shortcuts stand for is missing");
            return NULL;
        }
    }
    PyObject **slots[7] = {&tracker_globals, &orig_output_hook, &orig_consumer_hook, &orig_emit, &orig_backward,
                           &register_original, &disable_torch_function};
    PyObject *values[7] = {argv[0], found[0], found[1], found[2], found[3], argv[3], argv[4]};
    store_all(slots, values, 7);
    Py_RETURN_NONE;
}

static PyObject *configure(PyObject *Py_UNUSED(self), PyObject *const *argv, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyType_Check(argv[0]) || !PyCallable_Check(argv[2]) || !PyCallable_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "configure(tensor_type, strided_layout, ordered_dict_type, leaf_node)");
        return NULL;
    }
    PyObject **slots[4] = {&tensor_type, &strided, &ordered_dict, &leaf_node};
    store_all(slots, argv, 4);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(tensor_type, strided_layout, ordered_dict_type, leaf_node): what the walks compare with and call."},
    {"begin_layout", (PyCFunction)(void (*)(void))begin_layout, METH_FASTCALL,
     "begin_layout(args, kwargs, leaf_edges, edges, nodes) -> (args_layout, kw_layout): GradTracker.begin's walk."},
    {"emit", (PyCFunction)(void (*)(void))emit, METH_FASTCALL,
     "emit(tracker, pending): GradTracker._emit (the backward entry's grads handed to collector.backward)."},
    {"configure_defaults", (PyCFunction)(void (*)(void))configure_defaults, METH_FASTCALL,
     "configure_defaults(tracker_globals, tracker_type, collector_type, register_hook, disable_torch_function, "
     "pending_type, call_type): the methods the shortcuts stand for, torch's Node hook registration, "
     "torch._C.DisableTorchFunction, the __slots__ classes whose fields are read in place."},
    {"register_node_hook", (PyCFunction)(void (*)(void))register_node_hook, METH_FASTCALL,
     "register_node_hook(backward_hooks, hook) -> (hooks, handle): torch's _HookMixin._register_hook, a consumer "
     "hook's handle a (dict, hook) pair."},
    {"remove_handles", remove_handles, METH_O,
     "remove_handles(handles): GradTracker.remove's loop ((dict, key) pairs popped, other handles' remove())."},
    {"watch_single", (PyCFunction)(void (*)(void))watch_single, METH_FASTCALL,
     "watch_single(tracker, pending, output): GradTracker.watch_outputs for one tensor output."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_grad_walk", "The grad tracker's forward walks (grad_tracker.py) in C.", -1, methods,
    NULL, NULL, NULL, NULL,
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
    INTERN(s_records, "records");
    INTERN(s_on_tensor, "on_tensor");
    INTERN(s_describe_tensor, "describe_tensor");
    INTERN(s_describe, "describe");
    INTERN(s_describe_output, "describe_output");
    INTERN(s_counters, "counters");
    INTERN(s_module_stack, "module_stack");
    INTERN(s_current_step, "current_step");
    INTERN(s_stack_key, "_stack_key");
    INTERN(s_stack_cache, "_stack_cache");
    INTERN(s_data, "data");
    INTERN(s_stacks, "stacks");
    INTERN(s_construct, "construct");
    INTERN(s_dirty, "dirty");
    INTERN(s_active, "active");
    INTERN(s_guard, "guard");
    INTERN(s_report, "report");
    INTERN(s_walk_seq, "_walk_seq");
    INTERN(s_walk_map, "_walk_map");
    INTERN(s_untrack, "_untrack");
    INTERN(s_tensor_class, "_tensor_class");
    INTERN(s_name, "name");
    INTERN(s_backward_name, "backward_name");
    INTERN(s_leaf_edges, "_leaf_edges");
    INTERN(s_watch_outputs, "watch_outputs");
    INTERN(s_enter, "__enter__");
    INTERN(s_exit, "__exit__");
    INTERN(s_input_args, "input_args");
    INTERN(s_input_kwargs, "input_kwargs");
    INTERN(s_output, "output");
    INTERN(s_forward_suffix, ".forward");
    INTERN(s_level, "level");
    INTERN(s_l1, "L1");
    INTERN(s_stack_capture, "stack_capture");
    INTERN(s_capture, "capture");
    INTERN(s_done, "done");
    INTERN(s_output_grads, "output_grads");
    INTERN(s_input_grads, "input_grads");
    INTERN(s_add_input_grad, "_add_input_grad");
    INTERN(s_emit, "_emit");
    INTERN(s_pause, "pause");
    INTERN(s_backward, "backward");
    INTERN(s_call, "call");
    INTERN(s_args_layout, "args_layout");
    INTERN(s_kw_layout, "kw_layout");
    INTERN(s_nodes, "nodes");
    INTERN(s_collector, "collector");
    INTERN(s_key, "key");
    INTERN(s_silenced, "silenced");
    INTERN(s_dump, "dump");
    INTERN(s_OutputHook, "_OutputHook");
    INTERN(s_ConsumerHook, "_ConsumerHook");
    INTERN(s_emit_native, "_emit_native");
    INTERN(s_lane_ok, "lane_ok");
    INTERN(s_task, "task");
    INTERN(s_sink, "sink");
    INTERN(s_want_backward_input, "want_backward_input");
    INTERN(s_want_backward_output, "want_backward_output");
    INTERN(s_step, "step");
    INTERN(s_parent_backward, "parent_backward");
    INTERN(s_backward_name_slot, "_backward_name");
    INTERN(s_is_module, "is_module");
    INTERN(s_index, "index");
    INTERN(s_backward_dot, ".backward.");
    INTERN(s_dot_backward, ".backward");
    INTERN(s_input, "input");
    INTERN(s_depth, "depth");
    INTERN(s_local_attr, "_local");
    INTERN(s_remove, "remove");
    INTERN(s_lane_names, "_lane_names");
#undef INTERN
    if ((empty_tuple = PyTuple_New(0)) == NULL)
        return NULL;
    if ((zero = PyLong_FromLong(0)) == NULL || (one = PyLong_FromLong(1)) == NULL ||
        (minus_one = PyLong_FromLong(-1)) == NULL)
        return NULL;
    if (PyType_Ready(&lane_type) < 0 || PyType_Ready(&output_hook_type) < 0 || PyType_Ready(&consumer_hook_type) < 0 ||
        PyType_Ready(&entry_type) < 0 || PyType_Ready(&paused_type) < 0 || PyType_Ready(&marked_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyTypeObject *types[6] = {&lane_type, &output_hook_type, &consumer_hook_type, &entry_type, &paused_type,
                              &marked_type};
    const char *names[6] = {"Lane", "OutputHook", "ConsumerHook", "ModeEntry", "Paused", "MarkedOperator"};
    for (int i = 0; i < 6; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
