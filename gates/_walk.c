/* gates._walk: the warm path's walk of a tree, in C.
 *
 * `tree_rows` returns the bytes that gates/fastpath.py's `python_tree_rows` returns for
 * the same tree, and the newest timestamp it saw: each folder's rows sorted by name (a
 * folder's name, then "\0/"; a file's name, then "\0f" and its mode, inode, size, mtime and
 * ctime packed little-endian, and for a symlink "d" or "t" and its target's device and
 * key), then "\0", the folder's path relative to the top and "\0"; folders in the order of
 * a stack pushed in the listing's order. Python spends about 3.5 us a file on `lstat` here
 * (the syscall is 0.8 us; the rest is the call and the stat_result it builds), so a walk
 * of 25,000 files cost over 100 ms; this one costs the syscalls. tests/test_walk.py holds
 * both to the same bytes on random trees. Errors are ValueError: the caller's
 * IneligibleError (the full path runs). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __APPLE__ /* the same timespecs under BSD names */
#define st_mtim st_mtimespec
#define st_ctim st_ctimespec
#endif

typedef struct {
    char *data;
    size_t len, cap;
} Buffer;

static int reserve(Buffer *buffer, size_t more) {
    if (more > SIZE_MAX - buffer->len) return -1;
    if (buffer->len + more <= buffer->cap) return 0;
    size_t cap = buffer->cap ? buffer->cap : 4096;
    while (cap < buffer->len + more) {
        if (cap > SIZE_MAX / 2) return -1;
        cap *= 2;
    }
    char *data = realloc(buffer->data, cap);
    if (data == NULL) return -1;
    buffer->data = data;
    buffer->cap = cap;
    return 0;
}

static int add(Buffer *buffer, const void *bytes, size_t count) {
    if (reserve(buffer, count)) return -1;
    memcpy(buffer->data + buffer->len, bytes, count);
    buffer->len += count;
    return 0;
}

static int add_u32(Buffer *buffer, uint32_t value) {
    unsigned char bytes[4];
    for (int i = 0; i < 4; i++) bytes[i] = (unsigned char)(value >> (8 * i));
    return add(buffer, bytes, 4);
}

static int add_u64(Buffer *buffer, uint64_t value) {
    unsigned char bytes[8];
    for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)(value >> (8 * i));
    return add(buffer, bytes, 8);
}

/* seconds and nanoseconds as Python's st_*_ns, computed exactly as Python does: 0 when the
 * sum does not fit 64 signed bits (a product that alone overflows may still, with a
 * positive tv_nsec, land in range: -2**63 ns is a time tmpfs stores) */
static int to_ns(struct timespec when, int64_t *ns) {
    __int128 exact = (__int128)when.tv_sec * 1000000000 + when.tv_nsec;
    if (exact < INT64_MIN || exact > INT64_MAX) return 0;
    *ns = (int64_t)exact;
    return 1;
}

/* mode, inode, size, mtime, ctime: Python's "<IQQqq"; 0 when a field does not fit */
static int add_key(Buffer *buffer, const struct stat *info, int *fits, int64_t *newest) {
    int64_t mtime, ctime;
    if (info->st_size < 0 || !to_ns(info->st_mtim, &mtime) || !to_ns(info->st_ctim, &ctime)) {
        *fits = 0;
        return 0;
    }
    if (newest != NULL) {
        if (mtime > *newest) *newest = mtime;
        if (ctime > *newest) *newest = ctime;
    }
    if (add_u32(buffer, (uint32_t)info->st_mode) || add_u64(buffer, (uint64_t)info->st_ino) ||
        add_u64(buffer, (uint64_t)info->st_size) || add_u64(buffer, (uint64_t)mtime) ||
        add_u64(buffer, (uint64_t)ctime))
        return -1;
    return 0;
}

typedef struct {
    char *name;
    size_t len;
    int is_dir;
} Entry;

typedef struct {
    Entry *items;
    size_t len, cap;
} Entries;

static int compare_names(const void *left, const void *right) {
    const Entry *a = *(const Entry *const *)left, *b = *(const Entry *const *)right;
    size_t shorter = a->len < b->len ? a->len : b->len;
    int order = memcmp(a->name, b->name, shorter);
    if (order) return order;
    return a->len < b->len ? -1 : (a->len > b->len);
}

typedef struct {
    char **items;
    size_t len, cap;
} Stack;

static int push(Stack *stack, char *item) {
    if (stack->len == stack->cap) {
        size_t cap = stack->cap ? 2 * stack->cap : 64;
        char **items = realloc(stack->items, cap * sizeof *items);
        if (items == NULL) return -1;
        stack->items = items;
        stack->cap = cap;
    }
    stack->items[stack->len++] = item;
    return 0;
}

typedef struct {
    const char *top, *skip_top, *skip_all;
    Py_ssize_t top_len, skip_top_len, skip_all_len;
    PyObject *skip; /* a tuple of bytes: relative folders named and not entered */
    int track_newest;
} Walk;

/* why the walk stops, for the ValueError: the folder or path it names, and what happened */
typedef struct {
    char *path;
    const char *what;
    int out_of_memory;
} Failure;

static int skipped(const Walk *walk, const char *relative, size_t len) {
    Py_ssize_t count = PyTuple_GET_SIZE(walk->skip);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyTuple_GET_ITEM(walk->skip, i);
        if ((size_t)PyBytes_GET_SIZE(item) == len && !memcmp(PyBytes_AS_STRING(item), relative, len))
            return 1;
    }
    return 0;
}

static int same(const char *name, size_t len, const char *other, Py_ssize_t other_len) {
    return other_len > 0 && (size_t)other_len == len && !memcmp(name, other, len);
}

static char *joined(const char *prefix, const char *name, size_t name_len) {
    size_t prefix_len = strlen(prefix);
    char *path = malloc(prefix_len + name_len + 2);
    if (path == NULL) return NULL;
    size_t at = 0;
    if (prefix_len) {
        memcpy(path, prefix, prefix_len);
        path[prefix_len] = '/';
        at = prefix_len + 1;
    }
    memcpy(path + at, name, name_len);
    path[at + name_len] = '\0';
    return path;
}

/* ``relative`` under ``top``: ``top`` itself for the top folder ("", as Python's walk names it) */
static char *under(const char *top, const char *relative) {
    return *relative ? joined(top, relative, strlen(relative)) : strdup(top);
}

static int fail(Failure *failure, const char *top, const char *relative, const char *what) {
    failure->path = under(top, relative);
    if (failure->path == NULL) failure->out_of_memory = 1;
    failure->what = what;
    return -1;
}

/* one folder: its rows into ``out``, its subfolders onto ``pending`` in the listing's order */
static int folder_rows(const Walk *walk, const char *prefix, Buffer *out, Stack *pending,
                       int64_t *newest, Failure *failure) {
    char *path = under(walk->top, prefix);
    if (path == NULL) return (failure->out_of_memory = 1, -1);
    int handle = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(path);
    if (handle < 0) return fail(failure, walk->top, prefix, "unreadable");
    DIR *listing = fdopendir(handle);
    if (listing == NULL) {
        close(handle);
        return fail(failure, walk->top, prefix, "unreadable");
    }
    Entries entries = {0};
    Entry **sorted = NULL;
    int status = -1, at_top = !*prefix;
    for (;;) {
        errno = 0;
        struct dirent *found = readdir(listing);
        if (found == NULL) {
            if (errno) {
                fail(failure, walk->top, prefix, "unreadable");
                goto done;
            }
            break;
        }
        const char *name = found->d_name;
        size_t len = strlen(name);
        if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
            continue;
        int is_dir = found->d_type == DT_DIR;
        if (found->d_type == DT_UNKNOWN) {
            struct stat info;
            if (fstatat(dirfd(listing), name, &info, AT_SYMLINK_NOFOLLOW)) {
                fail(failure, walk->top, prefix, "unreadable");
                goto done;
            }
            is_dir = S_ISDIR(info.st_mode);
        }
        if (at_top && same(name, len, walk->skip_top, walk->skip_top_len)) continue;
        if (is_dir && same(name, len, walk->skip_all, walk->skip_all_len)) continue;
        if (entries.len == entries.cap) {
            size_t cap = entries.cap ? 2 * entries.cap : 64;
            Entry *items = realloc(entries.items, cap * sizeof *items);
            if (items == NULL) goto out_of_memory;
            entries.items = items;
            entries.cap = cap;
        }
        char *copy = malloc(len + 1);
        if (copy == NULL) goto out_of_memory;
        memcpy(copy, name, len + 1);
        entries.items[entries.len++] = (Entry){copy, len, is_dir};
    }
    sorted = malloc((entries.len ? entries.len : 1) * sizeof *sorted);
    if (sorted == NULL) goto out_of_memory;
    for (size_t i = 0; i < entries.len; i++) sorted[i] = &entries.items[i];
    qsort(sorted, entries.len, sizeof *sorted, compare_names);
    for (size_t i = 0; i < entries.len; i++) {
        const Entry *entry = sorted[i];
        if (add(out, entry->name, entry->len)) goto out_of_memory;
        if (entry->is_dir) {
            if (add(out, "\0/", 2)) goto out_of_memory;
            continue;
        }
        struct stat info;
        if (fstatat(dirfd(listing), entry->name, &info, AT_SYMLINK_NOFOLLOW)) {
            fail(failure, walk->top, prefix, "unreadable");
            goto done;
        }
        int fits = 1;
        if (add(out, "\0f", 2) || add_key(out, &info, &fits, walk->track_newest ? newest : NULL))
            goto out_of_memory;
        if (!fits) {
            fail(failure, walk->top, prefix, "a stat field beyond 64 bits");
            goto done;
        }
        if (!S_ISLNK(info.st_mode)) continue;
        struct stat target;
        if (fstatat(dirfd(listing), entry->name, &target, 0)) {
            if (add(out, "d", 1)) goto out_of_memory;
            continue;
        }
        char *link = joined(prefix, entry->name, entry->len);
        if (link == NULL) goto out_of_memory;
        if (S_ISDIR(target.st_mode)) {
            fail(failure, walk->top, link, "a symlinked folder");
            free(link);
            goto done;
        }
        if (add(out, "t", 1) || add_u64(out, (uint64_t)target.st_dev) ||
            add_key(out, &target, &fits, newest)) {
            free(link);
            goto out_of_memory;
        }
        if (!fits) {
            fail(failure, walk->top, link, "a stat field beyond 64 bits");
            free(link);
            goto done;
        }
        free(link);
    }
    if (add(out, "\0", 1) || add(out, prefix, strlen(prefix)) || add(out, "\0", 1))
        goto out_of_memory;
    for (size_t i = 0; i < entries.len; i++) { /* the listing's order, as Python pushes */
        const Entry *entry = &entries.items[i];
        if (!entry->is_dir) continue;
        char *relative = joined(prefix, entry->name, entry->len);
        if (relative == NULL) goto out_of_memory;
        if (skipped(walk, relative, strlen(relative))) {
            free(relative);
            continue;
        }
        if (push(pending, relative)) {
            free(relative);
            goto out_of_memory;
        }
    }
    status = 0;
    goto done;
out_of_memory:
    failure->out_of_memory = 1;
done:
    for (size_t i = 0; i < entries.len; i++) free(entries.items[i].name);
    free(entries.items);
    free(sorted);
    closedir(listing);
    return status;
}

static PyObject *tree_rows(PyObject *module, PyObject *args) {
    (void)module;
    Walk walk;
    if (!PyArg_ParseTuple(args, "y#y#y#O!p", &walk.top, &walk.top_len, &walk.skip_top,
                          &walk.skip_top_len, &walk.skip_all, &walk.skip_all_len, &PyTuple_Type,
                          &walk.skip, &walk.track_newest))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(walk.skip);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(walk.skip, i))) {
            PyErr_SetString(PyExc_TypeError, "skip: a tuple of bytes");
            return NULL;
        }
    }
    if ((size_t)walk.top_len != strlen(walk.top)) {
        PyErr_SetString(PyExc_ValueError, "a NUL in the top folder's path");
        return NULL;
    }
    Buffer out = {0};
    Stack pending = {0};
    Failure failure = {0};
    int64_t newest = 0;
    int status = 0;
    char *first = calloc(1, 1);
    if (first == NULL || push(&pending, first)) {
        free(first);
        failure.out_of_memory = 1;
        status = -1;
    }
    int interrupted = 0;
    while (status == 0 && pending.len) {
        if (PyErr_CheckSignals()) { /* Ctrl-C on a huge tree or a hung mount, as in Python */
            interrupted = 1;
            status = -1;
            break;
        }
        char *prefix = pending.items[--pending.len];
        status = folder_rows(&walk, prefix, &out, &pending, &newest, &failure);
        free(prefix);
    }
    while (pending.len) free(pending.items[--pending.len]);
    free(pending.items);
    PyObject *result = NULL;
    if (interrupted) {
        /* the signal handler's exception is set */
    } else if (status == 0) {
        result = Py_BuildValue("(y#L)", out.data ? out.data : "", (Py_ssize_t)out.len,
                               (long long)newest);
    } else if (failure.out_of_memory) {
        PyErr_NoMemory();
    } else {
        PyObject *where = PyUnicode_DecodeFSDefault(failure.path);
        if (where != NULL) {
            PyErr_Format(PyExc_ValueError, "%U: %s", where, failure.what);
            Py_DECREF(where);
        }
    }
    free(failure.path);
    free(out.data);
    return result;
}

static PyMethodDef methods[] = {
    {"tree_rows", tree_rows, METH_VARARGS,
     "tree_rows(top, skip_top, skip_all, skip, track_newest) -> (rows, newest_ns)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gates._walk", NULL, 0, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walk(void) {
    PyObject *made = PyModule_Create(&module);
#ifdef Py_GIL_DISABLED /* no state of its own: a free-threaded build need not take the GIL */
    if (made != NULL) PyUnstable_Module_SetGIL(made, Py_MOD_GIL_NOT_USED);
#endif
    return made;
}
