//! The calls that end the process image without running exit handlers: `_exit` / `_Exit` and the
//! `exec` family. Each closes the ring first (`lifecycle::image_end`), then makes the real call;
//! an `exec` that returns (it failed) lets tprof record on into a new ring. The variadic `execl`,
//! `execlp` and `execle` (x86_64) are trampolines that close the ring and jump to the real call
//! with the caller's registers and stack. A raw `exit_group` / `execve` system call cannot be seen.
//!
//! The real functions are resolved when libtprof is loaded, so the interposers never call the
//! dynamic loader later (a signal handler or a fork child may call `_exit`).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::base::dynamic_loader;
use crate::lifecycle::image_end;

type ExitFn = unsafe extern "C" fn(c_int) -> !;
type ExecveFn = unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
type ExecvFn = unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
type FexecveFn = unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int;
type ExecveatFn =
    unsafe extern "C" fn(c_int, *const c_char, *const *const c_char, *const *const c_char, c_int) -> c_int;

/// One real function, resolved at load.
struct Real {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
}

impl Real {
    const fn new(name: &'static CStr) -> Real {
        Real { name, ptr: AtomicPtr::new(std::ptr::null_mut()) }
    }

    fn resolve(&self) {
        if self.ptr.load(Ordering::Acquire).is_null() {
            self.ptr.store(dynamic_loader::next(self.name), Ordering::Release);
        }
    }

    fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return p;
        }
        self.resolve();
        self.ptr.load(Ordering::Acquire)
    }
}

static EXIT: Real = Real::new(c"_exit");
static EXIT_UPPER: Real = Real::new(c"_Exit");
static EXECVE: Real = Real::new(c"execve");
static EXECV: Real = Real::new(c"execv");
static EXECVP: Real = Real::new(c"execvp");
static EXECVPE: Real = Real::new(c"execvpe");
static FEXECVE: Real = Real::new(c"fexecve");
static EXECVEAT: Real = Real::new(c"execveat");
static EXECL: Real = Real::new(c"execl");
static EXECLP: Real = Real::new(c"execlp");
static EXECLE: Real = Real::new(c"execle");

extern "C" fn resolve_all() {
    for r in [&EXIT, &EXIT_UPPER, &EXECVE, &EXECV, &EXECVP, &EXECVPE, &FEXECVE, &EXECVEAT, &EXECL, &EXECLP, &EXECLE] {
        r.resolve();
    }
}

#[used]
#[link_section = ".init_array"]
static RESOLVE_REAL_PROCESS_CALLS: extern "C" fn() = resolve_all;

/// Ends the process with the real `_exit` / `_Exit`, or the system call when it is missing.
unsafe fn end_process(real: &Real, status: c_int) -> ! {
    let p = real.get();
    if !p.is_null() {
        // SAFETY: `p` is the C library's `_exit` / `_Exit`, whose signature is ExitFn.
        unsafe { std::mem::transmute::<*mut c_void, ExitFn>(p)(status) }
    }
    loop {
        // SAFETY: exit_group takes the status and does not return.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    image_end::before_exit();
    // SAFETY: as the C library's `_exit`.
    unsafe { end_process(&EXIT, status) }
}

#[allow(non_snake_case)]
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    image_end::before_exit();
    // SAFETY: as the C library's `_Exit`.
    unsafe { end_process(&EXIT_UPPER, status) }
}

/// Runs one `exec`: closes the ring, makes the call (`real` null: fails with ENOSYS), and when it
/// returns lets tprof record on, errno as the call left it.
fn exec_with(real: &Real, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    let closed = image_end::before_exec();
    let p = real.get();
    let rc = if p.is_null() {
        // SAFETY: errno is the calling thread's.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        -1
    } else {
        call(p)
    };
    // SAFETY: errno is the calling thread's.
    let errno = unsafe { *libc::__errno_location() };
    image_end::after_failed_exec(closed);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    rc
}

#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    // SAFETY: `p` is the C library's execve; the caller's arguments as it requires.
    exec_with(&EXECVE, |p| unsafe { std::mem::transmute::<*mut c_void, ExecveFn>(p)(path, argv, envp) })
}

#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: `p` is the C library's execv; the caller's arguments as it requires.
    exec_with(&EXECV, |p| unsafe { std::mem::transmute::<*mut c_void, ExecvFn>(p)(path, argv) })
}

#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: `p` is the C library's execvp; the caller's arguments as it requires.
    exec_with(&EXECVP, |p| unsafe { std::mem::transmute::<*mut c_void, ExecvFn>(p)(file, argv) })
}

#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    // SAFETY: `p` is the C library's execvpe; the caller's arguments as it requires.
    exec_with(&EXECVPE, |p| unsafe { std::mem::transmute::<*mut c_void, ExecveFn>(p)(file, argv, envp) })
}

#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    // SAFETY: `p` is the C library's fexecve; the caller's arguments as it requires.
    exec_with(&FEXECVE, |p| unsafe { std::mem::transmute::<*mut c_void, FexecveFn>(p)(fd, argv, envp) })
}

#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: `p` is the C library's execveat; the caller's arguments as it requires.
    exec_with(&EXECVEAT, |p| unsafe {
        std::mem::transmute::<*mut c_void, ExecveatFn>(p)(dirfd, path, argv, envp, flags)
    })
}

/// For a variadic `exec` trampoline: closes the ring (the next event, after an `exec` that failed,
/// opens a new one) and returns the real function, or null with errno ENOSYS.
fn prepare_variadic_exec(real: &Real) -> *mut c_void {
    image_end::before_exec_unseen_return();
    let p = real.get();
    if p.is_null() {
        // SAFETY: errno is the calling thread's.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
    }
    p
}

#[cfg(target_arch = "x86_64")]
extern "C" fn prepare_execl() -> *mut c_void {
    prepare_variadic_exec(&EXECL)
}

#[cfg(target_arch = "x86_64")]
extern "C" fn prepare_execlp() -> *mut c_void {
    prepare_variadic_exec(&EXECLP)
}

#[cfg(target_arch = "x86_64")]
extern "C" fn prepare_execle() -> *mut c_void {
    prepare_variadic_exec(&EXECLE)
}

/// The body of a variadic `exec` trampoline: on entry rsp = 8 mod 16; the six argument registers
/// and rax (the vector-register count of a variadic call) are saved (seven pushes keep the call
/// aligned), `prepare` closes the ring and returns the real function, the registers are restored
/// and the real function is entered with the caller's stack (its further arguments) and return
/// address; a missing real function returns -1.
#[cfg(target_arch = "x86_64")]
macro_rules! variadic_exec_trampoline {
    ($prepare:path) => {
        core::arch::naked_asm!(
            "push rdi",
            "push rsi",
            "push rdx",
            "push rcx",
            "push r8",
            "push r9",
            "push rax",
            "call {prepare}",
            "mov r11, rax",
            "pop rax",
            "pop r9",
            "pop r8",
            "pop rcx",
            "pop rdx",
            "pop rsi",
            "pop rdi",
            "test r11, r11",
            "jz 2f",
            "jmp r11",
            "2:",
            "mov eax, -1",
            "ret",
            prepare = sym $prepare,
        )
    };
}

/// `execl(path, arg0, ..., NULL)`, interposed.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn execl(_path: *const c_char, _arg0: *const c_char) -> c_int {
    variadic_exec_trampoline!(prepare_execl)
}

/// `execlp(file, arg0, ..., NULL)`, interposed.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn execlp(_file: *const c_char, _arg0: *const c_char) -> c_int {
    variadic_exec_trampoline!(prepare_execlp)
}

/// `execle(path, arg0, ..., NULL, envp)`, interposed.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn execle(_path: *const c_char, _arg0: *const c_char) -> c_int {
    variadic_exec_trampoline!(prepare_execle)
}
