/* cudart_library.c - mock CUDA runtime: libraries (cudaLibraryLoadData / LoadFromFile, GetKernel,
 * GetKernelCount, EnumerateKernels, Unload).
 *
 * The image is what cudaLibraryLoadData accepts: NUL-terminated PTX (kernels = `.entry` names), a
 * cubin (ELF: FUNC symbols marked as entries, st_other 0x10, as nvcc -cubin writes them) or a fatbin
 * container (magic 0xBA55ED50: the cubins and PTX it holds uncompressed). A kernel handle is the
 * process-wide function handle of its name (sg_func_handle), so launches through it (cudaLaunchKernel
 * with the cudaKernel_t as func, or cuLaunchKernel) run under the name CUPTI reports: the mangled
 * name in the image. */
#define _GNU_SOURCE
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudart_internal.h"

#define LIBRARY_MAGIC 0x4c494252u
typedef struct sg_library {
    uint32_t magic;
    unsigned n, cap;
    const char **names; /* interned */
} sg_library;

static sg_library *library_get(cudaLibrary_t h)
{
    sg_library *l = (sg_library *)h;
    return l && l->magic == LIBRARY_MAGIC ? l : NULL;
}

static void add_kernel(sg_library *l, const char *name, size_t len)
{
    char buf[1024];
    if (len == 0 || len >= sizeof buf) return;
    memcpy(buf, name, len);
    buf[len] = 0;
    const char *in = sg_intern(buf);
    for (unsigned i = 0; i < l->n; i++)
        if (l->names[i] == in) return;
    if (l->n == l->cap) {
        unsigned nc = l->cap ? l->cap * 2 : 8;
        const char **nn = realloc(l->names, nc * sizeof *nn);
        if (!nn) return;
        l->names = nn;
        l->cap = nc;
    }
    l->names[l->n++] = in;
}

static int ptx_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

/* PTX text of `len` bytes (or up to its NUL): every `.entry <name>`. */
static void scan_ptx(sg_library *l, const char *p, size_t len)
{
    const char *end = p + len;
    for (const char *q = p; q + 7 < end && *q; q++) {
        if (strncmp(q, ".entry", 6) != 0 || (q > p && ptx_name_char(q[-1])) || (q[6] != ' ' && q[6] != '\t'))
            continue;
        const char *n = q + 6;
        while (n < end && (*n == ' ' || *n == '\t')) n++;
        const char *e = n;
        while (e < end && ptx_name_char(*e)) e++;
        add_kernel(l, n, (size_t)(e - n));
        q = e - 1;
    }
}

/* A cubin: entry functions from its symbol table. Returns 0 when it is not a readable ELF64. */
static int scan_elf(sg_library *l, const unsigned char *img, size_t avail)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (avail < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return 0;
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > avail) return 0;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr *strs = &sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > avail || strs->sh_offset + strs->sh_size > avail) return 0;
        const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
        size_t nsym = sh[i].sh_size / sizeof *sym;
        const char *str = (const char *)(img + strs->sh_offset);
        for (size_t k = 0; k < nsym; k++) {
            if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || !(sym[k].st_other & 0x10)) continue;
            if (sym[k].st_name >= strs->sh_size) continue;
            const char *name = str + sym[k].st_name;
            add_kernel(l, name, strnlen(name, strs->sh_size - sym[k].st_name));
        }
    }
    return 1;
}

#define FATBIN_MAGIC 0xBA55ED50u
/* A fatbin container: {u32 magic; u16 version; u16 header size; u64 payload size} + entries; the
 * cubins (ELF headers) and PTX texts in the payload, where stored uncompressed. */
static void scan_fatbin(sg_library *l, const unsigned char *img)
{
    uint16_t hsize;
    uint64_t size;
    memcpy(&hsize, img + 6, sizeof hsize);
    memcpy(&size, img + 8, sizeof size);
    const unsigned char *p = img + hsize, *end = p + size;
    for (const unsigned char *q = p; q + SELFMAG <= end; q++)
        if (memcmp(q, ELFMAG, SELFMAG) == 0) scan_elf(l, q, (size_t)(end - q));
    scan_ptx(l, (const char *)p, size);
}

static cudaError_t load(cudaLibrary_t *out, const void *code, size_t avail)
{
    if (!out || !code) return cudaErrorInvalidValue;
    sg_library *l = calloc(1, sizeof *l);
    if (!l) return cudaErrorMemoryAllocation;
    l->magic = LIBRARY_MAGIC;
    const unsigned char *img = code;
    uint32_t magic;
    memcpy(&magic, img, sizeof magic);
    if (magic == FATBIN_MAGIC)
        scan_fatbin(l, img);
    else if (memcmp(img, ELFMAG, SELFMAG) == 0)
        scan_elf(l, img, avail);
    else
        scan_ptx(l, code, avail);
    if (l->n == 0) {
        free(l->names);
        free(l);
        return cudaErrorInvalidKernelImage;
    }
    *out = (cudaLibrary_t)l;
    return cudaSuccess;
}

cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code, enum cudaJitOption *jit_options,
                                void **jit_values, unsigned n_jit, enum cudaLibraryOption *lib_options,
                                void **lib_values, unsigned n_lib)
{
    (void)jit_options, (void)jit_values, (void)n_jit, (void)lib_options, (void)lib_values, (void)n_lib;
    sg_rt_init();
    API("cudaLibraryLoadData", NULL);
    /* no size is passed: an ELF is trusted to be as long as its headers say */
    RET(load(library, code, SIZE_MAX / 2));
}

cudaError_t cudaLibraryLoadFromFile(cudaLibrary_t *library, const char *path, enum cudaJitOption *jit_options,
                                    void **jit_values, unsigned n_jit, enum cudaLibraryOption *lib_options,
                                    void **lib_values, unsigned n_lib)
{
    (void)jit_options, (void)jit_values, (void)n_jit, (void)lib_options, (void)lib_values, (void)n_lib;
    sg_rt_init();
    API("cudaLibraryLoadFromFile", NULL);
    if (!library || !path) RET(cudaErrorInvalidValue);
    FILE *f = fopen(path, "rb");
    if (!f) RET(cudaErrorFileNotFound);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) RET(cudaErrorMemoryAllocation);
    buf[n] = 0;
    cudaError_t e = n >= sizeof(uint32_t) ? load(library, buf, n) : cudaErrorInvalidKernelImage;
    free(buf);
    RET(e);
}

cudaError_t cudaLibraryUnload(cudaLibrary_t library)
{
    sg_rt_init();
    API("cudaLibraryUnload", NULL);
    sg_library *l = library_get(library);
    if (!l) RET(cudaErrorInvalidResourceHandle);
    l->magic = 0;
    free(l->names);
    free(l);
    RET(cudaSuccess);
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *kernel, cudaLibrary_t library, const char *name)
{
    sg_rt_init();
    API("cudaLibraryGetKernel", NULL);
    sg_library *l = library_get(library);
    if (!l) RET(cudaErrorInvalidResourceHandle);
    if (!kernel || !name) RET(cudaErrorInvalidValue);
    const char *in = sg_intern(name);
    for (unsigned i = 0; i < l->n; i++)
        if (l->names[i] == in) {
            void *h = sg_func_handle(in);
            if (!h) RET(cudaErrorMemoryAllocation);
            *kernel = (cudaKernel_t)h;
            RET(cudaSuccess);
        }
    RET(cudaErrorSymbolNotFound);
}

cudaError_t cudaLibraryGetKernelCount(unsigned *count, cudaLibrary_t library)
{
    sg_rt_init();
    API("cudaLibraryGetKernelCount", NULL);
    sg_library *l = library_get(library);
    if (!l) RET(cudaErrorInvalidResourceHandle);
    if (!count) RET(cudaErrorInvalidValue);
    *count = l->n;
    RET(cudaSuccess);
}

cudaError_t cudaLibraryEnumerateKernels(cudaKernel_t *kernels, unsigned n, cudaLibrary_t library)
{
    sg_rt_init();
    API("cudaLibraryEnumerateKernels", NULL);
    sg_library *l = library_get(library);
    if (!l) RET(cudaErrorInvalidResourceHandle);
    if (!kernels) RET(cudaErrorInvalidValue);
    for (unsigned i = 0; i < n && i < l->n; i++) kernels[i] = (cudaKernel_t)sg_func_handle(l->names[i]);
    RET(cudaSuccess);
}
