# elfimage_gdb.py: let gdb see elfimage images loaded by a running Go
# process through the loader's debugger hook (github.com/elfimage/elfimage,
# gdbhook.go): zero-copy, beside the GDB JIT interface of package publish.
#
# Load with:  gdb -iex 'set auto-load safe-path /' -x elfimage_gdb.py PROGRAM
#
# The loader calls github.com/elfimage/elfimage.gdbImageLoaded after an
# image is mapped and relocated, and gdbImageUnloaded before Close unmaps
# it, with the global github.com/elfimage/elfimage.gdbImageEvent holding
# seven little-endian uint64: version (2), action (1 loaded, 2 unloaded),
# base, size, text (address of the first executable segment), the address
# of the image path and its length in bytes (version 1 had six, the path
# NUL-terminated). On each hit this script runs
# `add-symbol-file PATH -o BASE` (or `remove-symbol-file -a TEXT`; an image
# loaded from memory, whose PATH is no file, is copied from the process's
# memory to a temporary file first) and
# lets the program continue without stopping, so that pending breakpoints
# on procedures and file:line locations of the image resolve.

import atexit
import os
import struct
import tempfile

import gdb

PKG = "github.com/elfimage/elfimage"
EVENT = "'%s.gdbImageEvent'" % PKG
LOADED = "'%s.gdbImageLoaded'" % PKG
UNLOADED = "'%s.gdbImageUnloaded'" % PKG
EVENT_SIZE = 56
MAX_PATH = 4096

# Set to False to silence the one-line notes printed per image.
verbose = True

# Images added, by base address: (path, text address, temporary copy or None).
images = {}

# Largest in-memory image copied to a temporary file (bytes).
MAX_IMAGE = 1 << 30


def note(msg):
    if verbose:
        gdb.write("elfimage: %s\n" % msg)


def read_cstring(inf, addr):
    out = b""
    while len(out) < MAX_PATH:
        # Read up to the end of the page only, so that a string ending just
        # before an unmapped page is still read.
        n = min(256, 4096 - (addr + len(out)) % 4096)
        chunk = bytes(inf.read_memory(addr + len(out), n))
        i = chunk.find(b"\0")
        if i >= 0:
            return out + chunk[:i]
        out += chunk
    raise gdb.GdbError("image path longer than %d bytes" % MAX_PATH)


def symbol_address(name):
    # Evaluate in C whatever the frame's language (Go here): the symbol may
    # have no debug information (a binary linked with -ldflags=-w).
    lang = gdb.parameter("language")
    gdb.execute("set language c", to_string=True)
    try:
        return int(gdb.parse_and_eval("(unsigned long)&" + name))
    finally:
        gdb.execute("set language %s" % lang, to_string=True)


def read_event():
    inf = gdb.selected_inferior()
    addr = symbol_address(EVENT)
    version, = struct.unpack("<Q", bytes(inf.read_memory(addr, 8)))
    if version == 1:
        _, action, base, size, text, path = struct.unpack(
            "<6Q", bytes(inf.read_memory(addr, 48)))
        raw = read_cstring(inf, path)
    elif version == 2:
        _, action, base, size, text, path, n = struct.unpack(
            "<7Q", bytes(inf.read_memory(addr, EVENT_SIZE)))
        if n > MAX_PATH:
            raise gdb.GdbError("image path longer than %d bytes" % MAX_PATH)
        raw = bytes(inf.read_memory(path, n)) if n else b""
    else:
        raise gdb.GdbError("unknown gdbImageEvent version %d" % version)
    name = raw.decode("utf-8", "surrogateescape")
    return action, base, size, text, name


def quote(path):
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def on_loaded():
    action, base, size, text, path = read_event()
    if action != 1:
        raise gdb.GdbError("gdbImageLoaded with action %d" % action)
    if images.get(base, (None,))[0] == path:
        # add-symbol-file re-sets every breakpoint, which makes gdb forget
        # that it was stepping over this hook's breakpoint: the hook hits a
        # second time for the same event. Do nothing then.
        return
    tmp = None
    symfile = path
    if not os.path.isfile(path):
        # An image loaded from memory (elfimage.Load, and the library's
        # entry image): the whole file is mapped at base, the section
        # header table last. Copy it to a temporary file.
        tmp = copy_from_memory(base)
        if tmp is None:
            note("image %s at %#x is not a file and not readable; no symbols" % (path, base))
            return
        symfile = tmp
    gdb.execute("add-symbol-file %s -o %#x" % (quote(symfile), base), to_string=True)
    images[base] = (path, text, tmp)
    note("added symbol file %s at %#x" % (path, base))


def copy_from_memory(base):
    """Writes the ELF file mapped at base to a temporary file and returns
    its name, or None when it cannot be read."""
    inf = gdb.selected_inferior()
    try:
        hdr = bytes(inf.read_memory(base, 64))
        if hdr[:4] != b"\x7fELF" or hdr[4] != 2:
            return None
        shoff, = struct.unpack_from("<Q", hdr, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", hdr, 0x3a)
        size = shoff + shentsize * shnum
        if shoff == 0 or size > MAX_IMAGE:
            return None
        data = bytes(inf.read_memory(base, size))
    except gdb.MemoryError:
        return None
    fd, name = tempfile.mkstemp(prefix="elfimage-", suffix=".elf")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    atexit.register(remove_quietly, name)
    return name


def remove_quietly(name):
    try:
        os.remove(name)
    except OSError:
        pass


def on_unloaded():
    action, base, size, text, path = read_event()
    if action != 2:
        raise gdb.GdbError("gdbImageUnloaded with action %d" % action)
    if base not in images:
        return
    path, text, tmp = images.pop(base)
    if text:
        gdb.execute("remove-symbol-file -a %#x" % text, to_string=True)
    else:
        gdb.execute("remove-symbol-file %s" % quote(tmp or path), to_string=True)
    if tmp:
        remove_quietly(tmp)
    note("removed symbol file %s at %#x" % (path, base))


class Hook(gdb.Breakpoint):
    """An internal breakpoint that runs fn and never stops the program."""

    def __init__(self, spec, fn):
        super().__init__(spec, type=gdb.BP_BREAKPOINT, internal=True)
        self.fn = fn

    def stop(self):
        try:
            self.fn()
        except Exception as e:  # a failed hook must not stop the program
            gdb.write("elfimage: hook failed: %s\n" % e, gdb.STDERR)
        return False


gdb.execute("set breakpoint pending on")
gdb.execute("set confirm off")
gdb.execute("set print thread-events off")
# The Go runtime preempts goroutines with SIGURG: pass it silently.
gdb.execute("handle SIGURG nostop noprint pass")
Hook(LOADED, on_loaded)
Hook(UNLOADED, on_unloaded)
