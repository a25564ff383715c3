#!/bin/sh
# Rebuilds the relocatable objects the tests read (run from this
# directory). gcc 12 and clang 14 (Debian bookworm), binutils 2.40 (with binutils-aarch64-linux-gnu for the last line).
set -eu
gcc -c -O1 -g -gdwarf-5 -o gcc-x86-64-dwarf5.o reloc.c
gcc -c -O1 -g -gdwarf-4 -ffunction-sections -o gcc-x86-64-dwarf4-sections.o reloc.c
gcc -c -O1 -g -gdwarf-5 -gz=zlib -o gcc-x86-64-zlib.o reloc.c
gcc -c -O1 -g -gdwarf-4 -gz=zlib-gnu -o gcc-x86-64-zdebug.o reloc.c
gcc -m32 -c -O1 -g -gdwarf-5 -o gcc-i386-dwarf5.o reloc.c
objcopy --compress-debug-sections=zstd gcc-i386-dwarf5.o gcc-i386-zstd.o
clang-14 --target=x86_64-linux-gnu -c -O1 -g -gdwarf-5 -gz=zlib -o clang-x86-64-zlib.o reloc.c
clang-14 --target=i386-linux-gnu -c -O1 -g -gdwarf-4 -o clang-i386-dwarf4.o reloc.c
clang-14 --target=aarch64-linux-gnu -c -O1 -g -gdwarf-5 -o clang-aarch64-dwarf5.o reloc.c
clang-14 --target=armv7a-linux-gnueabihf -c -O1 -g -gdwarf-4 -o clang-arm-dwarf4.o reloc.c
aarch64-linux-gnu-objcopy --compress-debug-sections=zstd clang-aarch64-dwarf5.o clang-aarch64-zstd.o
