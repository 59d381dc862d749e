//! A client's requests run on the JavaScript thread that made the client, driven by that
//! thread's event loop (libuv), as Node's own sockets are. A request is written from the call
//! that starts it; its reply is read in the turn of the loop in which it arrives, and the
//! machine that asked for it is stepped there. Without this, each request crossed to the
//! tokio runtime's thread and its answer crossed back: two thread wake-ups per request.
//!
//! - Tasks: the futures of the requests `lib.rs` starts, and hyper's connection tasks, polled
//!   here with the addon's tokio runtime entered, so that their timers, the tasks they spawn
//!   and the set-up of their connections (DNS, connect) go to that runtime. What wakes a task
//!   from another thread (a timer, a heartbeat's end that a release waits for) reaches this
//!   loop through one `uv_async_t`.
//! - Sockets: a connection made for a request of this thread (`Connector`) is watched by a
//!   `uv_poll_t`; one made elsewhere by the tokio runtime's reactor (`AsyncFd`).
//! - The end of the environment (a Worker's, or the process's): tasks still under way and
//!   every socket move to the tokio runtime, where they go on as they would have (an
//!   acquisition that the client's own cleanup cancelled releases what it took), and every
//!   libuv handle is closed before Node closes the loop (an asynchronous cleanup hook).
//! - libuv's functions are looked up in the process when first needed: where there are none
//!   (a host other than Node), and off Unix, requests run on the tokio runtime.

use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::null_mut;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use napi::sys;
use tokio::io::unix::AsyncFd;

/// A task of a thread's loop: sendable, so that it can move to the runtime at the end.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// libuv's handle types and poll events (uv.h).
const UV_ASYNC: c_int = 1;
const UV_POLL: c_int = 8;
const UV_READABLE: c_int = 1;
const UV_WRITABLE: c_int = 2;

type Handle = *mut c_void;
type Loop = *mut sys::uv_loop_s;

/// libuv's functions, as the process exports them: each found by its name, with the type it
/// has in uv.h.
macro_rules! functions {
    ($($field:ident: $name:literal => $ty:ty,)*) => {
        struct Uv {
            $($field: $ty,)*
        }

        fn find() -> Option<Uv> {
            Some(Uv {
                $($field: {
                    // SAFETY: a lookup by name in the process; a symbol found is libuv's
                    // function of that name, of the type uv.h gives it.
                    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, concat!($name, "\0").as_ptr() as *const c_char) };
                    if f.is_null() {
                        return None;
                    }
                    unsafe { std::mem::transmute::<*mut c_void, $ty>(f) }
                },)*
            })
        }
    };
}

functions! {
    handle_size: "uv_handle_size" => unsafe extern "C" fn(c_int) -> usize,
    async_init: "uv_async_init" => unsafe extern "C" fn(Loop, Handle, unsafe extern "C" fn(Handle)) -> c_int,
    async_send: "uv_async_send" => unsafe extern "C" fn(Handle) -> c_int,
    poll_init_socket: "uv_poll_init_socket" => unsafe extern "C" fn(Loop, Handle, c_int) -> c_int,
    poll_start: "uv_poll_start" => unsafe extern "C" fn(Handle, c_int, unsafe extern "C" fn(Handle, c_int, c_int)) -> c_int,
    poll_stop: "uv_poll_stop" => unsafe extern "C" fn(Handle) -> c_int,
    close: "uv_close" => unsafe extern "C" fn(Handle, unsafe extern "C" fn(Handle)),
    unref: "uv_unref" => unsafe extern "C" fn(Handle),
    set_data: "uv_handle_set_data" => unsafe extern "C" fn(Handle, *mut c_void),
    get_data: "uv_handle_get_data" => unsafe extern "C" fn(Handle) -> *mut c_void,
}

fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(find).as_ref()
}

/// A new handle's memory, zeroed: libuv's size for its type.
fn layout(uv: &Uv, kind: c_int) -> Layout {
    // SAFETY: a pure function of libuv's.
    let size = unsafe { (uv.handle_size)(kind) };
    Layout::from_size_align(size.max(1), 16).expect("a handle's size")
}

fn new_handle(uv: &Uv, kind: c_int) -> Handle {
    // SAFETY: the layout's size is not zero.
    let h = unsafe { std::alloc::alloc_zeroed(layout(uv, kind)) } as Handle;
    if h.is_null() {
        std::alloc::handle_alloc_error(layout(uv, kind));
    }
    h
}

/// Frees a handle libuv is done with (its close callback has run), or never took.
unsafe fn free_handle(uv: &Uv, kind: c_int, h: Handle) {
    unsafe { std::alloc::dealloc(h as *mut u8, layout(uv, kind)) }
}

/// What wakers, from any thread, reach of a thread's loop.
struct Shared {
    ready: Mutex<Ready>,
    thread: ThreadId,
}

struct Ready {
    /// Tasks woken since the loop last ran them.
    ids: Vec<usize>,
    /// The loop's `uv_async_t`; null once the environment ended.
    wake: Handle,
}

// SAFETY: `wake` is only used under the mutex, through `uv_async_send`, which libuv allows from
// any thread, and is closed (set to null first) under the same mutex.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    fn ready(&self) -> MutexGuard<'_, Ready> {
        self.ready.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Ready {
    /// Has the loop run its tasks and calls in a turn of its own (nothing once the
    /// environment ended).
    fn tell(&self) {
        if let (false, Some(uv)) = (self.wake.is_null(), uv()) {
            // SAFETY: the handle is open while `wake` is not null, which the caller's guard
            // of the mutex keeps so.
            unsafe { (uv.async_send)(self.wake) };
        }
    }
}

struct TaskWaker {
    id: usize,
    shared: Arc<Shared>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut ready = self.shared.ready();
        if ready.wake.is_null() {
            // The task moved to the runtime, which polls it with a waker of its own.
            return;
        }
        ready.ids.push(self.id);
        // Woken by a task the loop is running: it runs it before it stops. Otherwise the
        // loop is told (from this thread too, when not inside `run`).
        let running = RUNNING.try_with(Cell::get).unwrap_or(false) && std::thread::current().id() == self.shared.thread;
        if !running {
            ready.tell();
        }
    }
}

struct Slot {
    task: Option<Task>,
    waker: Waker,
}

/// One JavaScript thread's tasks and sockets.
struct Local {
    uv: &'static Uv,
    lp: Loop,
    env: sys::napi_env,
    /// The async context JavaScript is called back in (`call`).
    context: sys::napi_async_context,
    /// JavaScript functions `call` calls, by the number `keep` gave them.
    functions: RefCell<std::collections::HashMap<u64, sys::napi_ref>>,
    next_function: Cell<u64>,
    /// Calls to make, in the order they were asked for (`call`).
    outbox: RefCell<std::collections::VecDeque<(u64, Delivery)>>,
    shared: Arc<Shared>,
    tasks: RefCell<Vec<Slot>>,
    free: RefCell<Vec<usize>>,
    /// Sockets watched by this loop, for the end of the environment.
    sockets: RefCell<Vec<Weak<Watch>>>,
}

thread_local! {
    static LOCAL: RefCell<Option<Rc<Local>>> = const { RefCell::new(None) };
    /// The loop of this thread runs its tasks.
    static RUNNING: Cell<bool> = const { Cell::new(false) };
    /// ... in a callback of the loop, not in a call from JavaScript.
    static CALLBACK: Cell<bool> = const { Cell::new(false) };
}

fn local() -> Option<Rc<Local>> {
    LOCAL.with(|l| l.borrow().clone())
}

/// Whether requests made on this thread run on its loop.
pub fn here() -> bool {
    LOCAL.with(|l| l.borrow().is_some())
}

/// Makes this thread's loop run the requests started on it, from now until its environment
/// ends (once per thread; nothing where libuv or the runtime is missing).
pub fn init(env: &napi::Env) {
    if here() {
        return;
    }
    if let Some(local) = Local::open(env.raw()) {
        LOCAL.with(|l| *l.borrow_mut() = Some(local));
    }
}

impl Local {
    fn open(env: sys::napi_env) -> Option<Rc<Local>> {
        let uv = uv()?;
        let mut lp: Loop = null_mut();
        // SAFETY: `env` is the calling environment's.
        if unsafe { sys::napi_get_uv_event_loop(env, &mut lp) } != sys::Status::napi_ok || lp.is_null() {
            return None;
        }
        let mut context = null_mut();
        // SAFETY: on this environment's thread; the resource object is kept by the context.
        unsafe {
            let (mut resource, mut name) = (null_mut(), null_mut());
            let label = "dynamodb-lock-native";
            if sys::napi_create_object(env, &mut resource) != sys::Status::napi_ok
                || sys::napi_create_string_utf8(env, label.as_ptr() as *const c_char, label.len() as isize, &mut name)
                    != sys::Status::napi_ok
                || sys::napi_async_init(env, resource, name, &mut context) != sys::Status::napi_ok
            {
                return None;
            }
        }
        let wake = new_handle(uv, UV_ASYNC);
        // SAFETY: a zeroed handle of libuv's size, on this thread's loop; unreferenced, so
        // that it keeps no process alive.
        unsafe {
            if (uv.async_init)(lp, wake, on_wake) != 0 {
                free_handle(uv, UV_ASYNC, wake);
                sys::napi_async_destroy(env, context);
                return None;
            }
            (uv.unref)(wake);
        }
        let local = Rc::new(Local {
            uv,
            lp,
            env,
            context,
            functions: RefCell::default(),
            next_function: Cell::new(1),
            outbox: RefCell::default(),
            shared: Arc::new(Shared {
                ready: Mutex::new(Ready { ids: Vec::new(), wake }),
                thread: std::thread::current().id(),
            }),
            tasks: RefCell::default(),
            free: RefCell::default(),
            sockets: RefCell::default(),
        });
        // SAFETY: the hook runs on this thread when the environment ends.
        let status = unsafe { sys::napi_add_async_cleanup_hook(env, Some(on_cleanup), null_mut(), null_mut()) };
        if status != sys::Status::napi_ok {
            // Without the hook the handle could not be closed in time: no loop of ours here.
            local.shared.ready().wake = null_mut();
            // SAFETY: the handle is open and nothing else knows of it; so is the context.
            unsafe {
                (uv.close)(wake, on_closed::<UV_ASYNC>);
                sys::napi_async_destroy(env, context);
            }
            return None;
        }
        Some(local)
    }

    fn insert(&self, task: Task) -> usize {
        let mut tasks = self.tasks.borrow_mut();
        let id = self.free.borrow_mut().pop().unwrap_or(tasks.len());
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            shared: self.shared.clone(),
        }));
        let slot = Slot {
            task: Some(task),
            waker,
        };
        match tasks.get_mut(id) {
            Some(s) => *s = slot,
            None => tasks.push(slot),
        }
        id
    }

    /// Runs `wake` (which wakes tasks, as running them would: the loop is not told again),
    /// then polls every task woken, until none is; `callback`: in a callback of the loop.
    fn run_after(&self, callback: bool, wake: impl FnOnce()) {
        struct Running;
        impl Drop for Running {
            fn drop(&mut self) {
                RUNNING.with(|r| r.set(false));
                CALLBACK.with(|r| r.set(false));
            }
        }
        RUNNING.with(|r| r.set(true));
        CALLBACK.with(|r| r.set(callback));
        let _running = Running;
        wake();
        loop {
            // The addon's runtime as napi-rs keeps it (a new one for each run of the addon's
            // environments).
            napi::bindgen_prelude::within_runtime_if_available(|| self.run_tasks());
            // JavaScript is called from a callback of the loop only: a call from JavaScript
            // may not expect its answer yet.
            if !callback || !self.deliver() {
                return;
            }
        }
    }

    /// Makes the calls asked for, in order; whether there were any (they may have woken
    /// tasks, or started new ones).
    fn deliver(&self) -> bool {
        let mut any = false;
        loop {
            let next = self.outbox.borrow_mut().pop_front();
            let Some((id, delivery)) = next else { return any };
            any = true;
            let f = self.functions.borrow().get(&id).copied();
            if let Some(f) = f {
                let _ = catch_unwind(AssertUnwindSafe(|| self.make_callback(f, delivery)));
            }
        }
    }

    /// Calls `f` with the arguments `args` makes, in a handle scope and in the loop's async
    /// context, so that the promise jobs and ticks it queues run before it returns, as after
    /// any callback from Node.
    fn make_callback(&self, f: sys::napi_ref, args: Delivery) {
        let env = self.env;
        // SAFETY: on the environment's thread, in a callback of its loop (not inside
        // JavaScript).
        unsafe {
            let mut scope = null_mut();
            if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
                return;
            }
            let (mut func, mut recv, mut result) = (null_mut(), null_mut(), null_mut());
            if sys::napi_get_reference_value(env, f, &mut func) == sys::Status::napi_ok
                && !func.is_null()
                // The receiver must be an object: the global one, as for a plain call.
                && sys::napi_get_global(env, &mut recv) == sys::Status::napi_ok
            {
                if let Ok(argv) = args(env) {
                    let status =
                        sys::napi_make_callback(env, self.context, recv, func, argv.len(), argv.as_ptr(), &mut result);
                    if status == sys::Status::napi_pending_exception {
                        // Thrown by the function: an uncaught exception, as from any callback.
                        let mut e = null_mut();
                        if sys::napi_get_and_clear_last_exception(env, &mut e) == sys::Status::napi_ok {
                            sys::napi_fatal_exception(env, e);
                        }
                    }
                }
            }
            sys::napi_close_handle_scope(env, scope);
        }
    }

    fn run_tasks(&self) {
        loop {
            let ids = std::mem::take(&mut self.shared.ready().ids);
            if ids.is_empty() {
                return;
            }
            for id in ids {
                let taken = self
                    .tasks
                    .borrow_mut()
                    .get_mut(id)
                    .and_then(|s| Some((s.task.take()?, s.waker.clone())));
                let Some((mut task, waker)) = taken else { continue };
                let polled = catch_unwind(AssertUnwindSafe(|| {
                    task.as_mut().poll(&mut Context::from_waker(&waker))
                }));
                match polled {
                    Ok(Poll::Pending) => match self.tasks.borrow_mut().get_mut(id) {
                        Some(slot) => slot.task = Some(task),
                        // The environment ended while the task ran (it called JavaScript,
                        // which exited): it goes on on the runtime, as the others did.
                        None => drop(napi::bindgen_prelude::spawn(task)),
                    },
                    // Done, or panicked (a request's task answers its own panic; a connection's
                    // ends with its connection).
                    Ok(Poll::Ready(())) | Err(_) => self.free.borrow_mut().push(id),
                }
            }
        }
    }

    /// The environment ends: every socket and task moves to the runtime, and every handle is
    /// closed; the last close ends the cleanup hook.
    fn close(&self, hook: sys::napi_async_cleanup_hook_handle) {
        let closing = Box::into_raw(Box::new(Closing { left: 1, hook }));
        // Sockets first: a task moved to the runtime may be polled there at once, and must
        // find its socket on the runtime's reactor.
        for watch in self.sockets.borrow_mut().drain(..).filter_map(|w| w.upgrade()) {
            if let Some(h) = watch.detach() {
                // SAFETY: the handle is open; its data, the `Watch` it held, was let go by
                // `detach`; no poll callback comes after `uv_close`.
                unsafe {
                    (*closing).left += 1;
                    (self.uv.set_data)(h, closing as *mut c_void);
                    (self.uv.close)(h, on_closed::<UV_POLL>);
                }
            }
        }
        let wake = std::mem::replace(&mut self.shared.ready().wake, null_mut());
        // SAFETY: no waker uses the handle once `wake` is null.
        unsafe {
            (self.uv.set_data)(wake, closing as *mut c_void);
            (self.uv.close)(wake, on_closed::<UV_ASYNC>);
        }
        let tasks = std::mem::take(&mut *self.tasks.borrow_mut());
        for task in tasks.into_iter().filter_map(|s| s.task) {
            napi::bindgen_prelude::spawn(task);
        }
    }
}

/// Handles still to close at the end of an environment, and the hook that waits for them.
struct Closing {
    left: usize,
    hook: sys::napi_async_cleanup_hook_handle,
}

/// One handle of an ending environment is closed; the last one ends its cleanup hook.
unsafe fn closed(uv: &Uv, h: Handle) {
    let closing = unsafe { (uv.get_data)(h) } as *mut Closing;
    if closing.is_null() {
        return;
    }
    unsafe {
        (*closing).left -= 1;
        if (*closing).left == 0 {
            let c = Box::from_raw(closing);
            sys::napi_remove_async_cleanup_hook(c.hook);
        }
    }
}

/// The close callback of a handle of type `KIND` (`UV_ASYNC`, `UV_POLL`) whose data is a
/// `Closing` (or null): counted, then freed.
unsafe extern "C" fn on_closed<const KIND: c_int>(h: Handle) {
    if let Some(uv) = uv() {
        unsafe {
            closed(uv, h);
            free_handle(uv, KIND, h);
        }
    }
}

unsafe extern "C" fn on_cleanup(hook: sys::napi_async_cleanup_hook_handle, _: *mut c_void) {
    let local = LOCAL.with(|l| l.borrow_mut().take());
    if let Some(l) = &local {
        // SAFETY: the context is this environment's, destroyed once; the functions' references
        // go with the environment.
        unsafe { sys::napi_async_destroy(l.env, l.context) };
    }
    let closed = local.map(|l| catch_unwind(AssertUnwindSafe(|| l.close(hook))).is_ok());
    if closed != Some(true) {
        // Nothing of ours is left to wait for (or a panic left it unknown): the loop may end.
        unsafe { sys::napi_remove_async_cleanup_hook(hook) };
    }
}

unsafe extern "C" fn on_wake(_: Handle) {
    let _ = catch_unwind(|| {
        if let Some(l) = local() {
            l.run_after(true, || {});
        }
    });
}

/// Runs `task` on this thread's loop, polled at once (by the loop, when this is inside it);
/// gives it back on a thread whose requests do not run on its loop.
pub fn spawn(task: Task) -> Result<(), Task> {
    let Some(local) = local() else { return Err(task) };
    let id = local.insert(task);
    local.shared.ready().ids.push(id);
    if !RUNNING.with(Cell::get) {
        local.run_after(false, || {});
    }
    Ok(())
}

/// Makes a call's arguments, as JavaScript values.
type Delivery = Box<dyn FnOnce(sys::napi_env) -> napi::Result<Vec<sys::napi_value>>>;

/// A JavaScript function kept for `call`, on the thread whose environment it belongs to.
#[derive(Clone, Copy, Debug)]
pub struct Kept {
    thread: ThreadId,
    id: u64,
}

/// Keeps a reference to the JavaScript function `f` for `call`; none on a thread whose
/// requests do not run on its loop.
pub fn keep(f: sys::napi_value) -> Option<Kept> {
    let l = local()?;
    let mut r = null_mut();
    // SAFETY: `f` is a value of this thread's environment, in the caller's scope.
    if unsafe { sys::napi_create_reference(l.env, f, 1, &mut r) } != sys::Status::napi_ok {
        return None;
    }
    let id = l.next_function.get();
    l.next_function.set(id + 1);
    l.functions.borrow_mut().insert(id, r);
    Some(Kept {
        thread: l.shared.thread,
        id,
    })
}

/// Lets go of a function `keep` kept (nothing once its environment ended).
pub fn forget(f: Kept) {
    if let Some(l) = local().filter(|l| l.shared.thread == f.thread) {
        if let Some(r) = l.functions.borrow_mut().remove(&f.id) {
            // SAFETY: a reference of this environment, deleted once.
            unsafe { sys::napi_delete_reference(l.env, r) };
        }
    }
}

/// Calls `f` with the arguments `args` makes of `value`, on the thread `f` belongs to, from
/// a callback of its loop, after every call asked for before (events of a lock come before
/// the answer that follows them): at the end of this turn of the loop when inside one, else
/// in a turn of its own. Elsewhere (another thread, or its environment ended) `value` is
/// given back, for the thread-safe way.
pub fn call<T: 'static>(
    f: Kept,
    value: T,
    args: fn(sys::napi_env, T) -> napi::Result<Vec<sys::napi_value>>,
) -> Result<(), T> {
    let Some(l) = local().filter(|l| l.shared.thread == f.thread) else {
        return Err(value);
    };
    l.outbox
        .borrow_mut()
        .push_back((f.id, Box::new(move |env| args(env, value))));
    if !CALLBACK.with(Cell::get) {
        l.shared.ready().tell();
    }
    Ok(())
}

/// Where hyper's connection tasks run: on the loop of the thread that made the connection,
/// or on the runtime.
#[derive(Clone, Copy)]
pub struct Executor;

impl<F: Future<Output = ()> + Send + 'static> hyper::rt::Executor<F> for Executor {
    fn execute(&self, fut: F) {
        if let Err(task) = spawn(Box::pin(fut)) {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn(task)),
                Err(_) => drop(napi::bindgen_prelude::spawn(task)),
            }
        }
    }
}

/// A socket's interest, as the loop watches it.
struct Watch(Mutex<Interest>);

struct Interest {
    /// The `uv_poll_t`; null once the socket moved to the runtime.
    handle: Handle,
    thread: ThreadId,
    read: Option<Waker>,
    write: Option<Waker>,
    /// The events the handle is started for.
    events: c_int,
    /// The socket may be readable, writable: no `WouldBlock` since the loop last said so. A
    /// read that is known to block is not tried (a connection reads as soon as it has written
    /// its request, well before the reply).
    readable: bool,
    writable: bool,
}

// SAFETY: the handle is used only on `thread` (checked), under the mutex.
unsafe impl Send for Watch {}
unsafe impl Sync for Watch {}

#[derive(Clone, Copy)]
enum Dir {
    Read,
    Write,
}

impl Watch {
    fn lock(&self) -> MutexGuard<'_, Interest> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the socket may be ready in `dir` (or moved to the runtime).
    fn may_be_ready(&self, dir: Dir) -> bool {
        let i = self.lock();
        i.handle.is_null()
            || match dir {
                Dir::Read => i.readable,
                Dir::Write => i.writable,
            }
    }

    /// Waits for the socket to be ready in `dir`: `Ok(false)` if it moved to the runtime.
    fn wait(&self, cx: &Context<'_>, dir: Dir) -> io::Result<bool> {
        let mut guard = self.lock();
        let i = &mut *guard;
        if i.handle.is_null() {
            return Ok(false);
        }
        if std::thread::current().id() != i.thread {
            return Err(io::Error::other(
                "a connection of one JavaScript thread was used on another thread",
            ));
        }
        let (slot, ready) = match dir {
            Dir::Read => (&mut i.read, &mut i.readable),
            Dir::Write => (&mut i.write, &mut i.writable),
        };
        *ready = false;
        match slot {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        i.update();
        Ok(true)
    }

    /// Takes the handle off the loop (its `Watch` reference let go), for the runtime to watch
    /// the socket instead.
    fn detach(self: &Arc<Self>) -> Option<Handle> {
        let mut i = self.lock();
        let h = std::mem::replace(&mut i.handle, null_mut());
        i.read = None;
        i.write = None;
        drop(i);
        if h.is_null() {
            return None;
        }
        let uv = uv()?;
        // SAFETY: the handle's data is the reference `Socket::new` gave it.
        unsafe {
            drop(Arc::from_raw((uv.get_data)(h) as *const Watch));
            (uv.set_data)(h, null_mut());
        }
        Some(h)
    }
}

impl Interest {
    /// Starts the handle for the events someone waits for, stops it when nobody does.
    fn update(&mut self) {
        let Some(uv) = uv() else { return };
        let want = self.read.as_ref().map_or(0, |_| UV_READABLE) | self.write.as_ref().map_or(0, |_| UV_WRITABLE);
        if want != self.events && !self.handle.is_null() {
            // SAFETY: the handle is open, on this thread (`wait`, or its own callback).
            unsafe {
                match want {
                    0 => (uv.poll_stop)(self.handle),
                    _ => (uv.poll_start)(self.handle, want, on_poll),
                };
            }
            self.events = want;
        }
    }
}

unsafe extern "C" fn on_poll(h: Handle, status: c_int, events: c_int) {
    let _ = catch_unwind(|| {
        let Some(uv) = uv() else { return };
        // SAFETY: while the handle is open, its data is a reference to its `Watch`.
        let watch = unsafe { &*((uv.get_data)(h) as *const Watch) };
        let (read, write) = {
            let mut i = watch.lock();
            i.readable |= status < 0 || events & UV_READABLE != 0;
            i.writable |= status < 0 || events & UV_WRITABLE != 0;
            let read = i.readable.then(|| i.read.take()).flatten();
            let write = i.writable.then(|| i.write.take()).flatten();
            (read, write)
        };
        let wake = || read.into_iter().chain(write).for_each(Waker::wake);
        match local() {
            Some(l) => l.run_after(true, wake),
            None => wake(),
        }
        // The handle stays started for what its tasks wait for again (a connection reads
        // on after each reply), and stops for what nobody does: level-triggered, it would
        // otherwise call back at every turn of the loop.
        watch.lock().update();
    });
}

unsafe extern "C" fn on_socket_closed(h: Handle) {
    if let Some(uv) = uv() {
        // SAFETY: the handle's data is the reference to its `Watch` it held; libuv is done
        // with the handle.
        unsafe {
            drop(Arc::from_raw((uv.get_data)(h) as *const Watch));
            free_handle(uv, UV_POLL, h);
        }
    }
}

/// A socket's file descriptor, for the runtime's reactor.
struct Fd(RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A connection's socket: watched by this thread's loop when it was made there, by the
/// runtime's reactor otherwise (made on another thread, or moved there when the environment
/// ended).
pub struct Socket {
    stream: std::mem::ManuallyDrop<std::net::TcpStream>,
    watch: Option<Arc<Watch>>,
    reactor: Option<AsyncFd<Fd>>,
}

impl Socket {
    fn new(stream: std::net::TcpStream) -> io::Result<Socket> {
        stream.set_nonblocking(true)?;
        let fd = stream.as_raw_fd();
        let mut socket = Socket {
            stream: std::mem::ManuallyDrop::new(stream),
            watch: None,
            reactor: None,
        };
        match local() {
            Some(l) => {
                let h = new_handle(l.uv, UV_POLL);
                // SAFETY: a zeroed handle of libuv's size, on this thread's loop; unreferenced,
                // so that it keeps no process alive (pending requests do, from JavaScript).
                if unsafe { (l.uv.poll_init_socket)(l.lp, h, fd) } != 0 {
                    unsafe { free_handle(l.uv, UV_POLL, h) };
                    return Err(io::Error::other("libuv could not watch the socket"));
                }
                let watch = Arc::new(Watch(Mutex::new(Interest {
                    handle: h,
                    thread: std::thread::current().id(),
                    read: None,
                    write: None,
                    events: 0,
                    readable: true,
                    writable: true,
                })));
                unsafe {
                    (l.uv.unref)(h);
                    (l.uv.set_data)(h, Arc::into_raw(watch.clone()) as *mut c_void);
                }
                let mut sockets = l.sockets.borrow_mut();
                sockets.retain(|w| w.strong_count() > 0);
                sockets.push(Arc::downgrade(&watch));
                socket.watch = Some(watch);
            }
            None => socket.reactor = Some(reactor(fd)?),
        }
        Ok(socket)
    }

    /// Runs `op` on the socket until it does not block, waiting for readiness in `dir`.
    fn poll_io<T>(
        &mut self,
        cx: &mut Context<'_>,
        dir: Dir,
        mut op: impl FnMut(&std::net::TcpStream) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        loop {
            if let Some(r) = &self.reactor {
                let ready = match dir {
                    Dir::Read => r.poll_read_ready(cx),
                    Dir::Write => r.poll_write_ready(cx),
                };
                let mut guard = std::task::ready!(ready)?;
                match guard.try_io(|_| op(&self.stream)) {
                    Ok(result) => return Poll::Ready(result),
                    Err(_would_block) => continue,
                }
            }
            if self.watch.as_ref().is_none_or(|w| w.may_be_ready(dir)) {
                match op(&self.stream) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    result => return Poll::Ready(result),
                }
            }
            match self.watch.as_ref().map(|w| w.wait(cx, dir)) {
                Some(Ok(true)) => return Poll::Pending,
                Some(Err(e)) => return Poll::Ready(Err(e)),
                // Moved to the runtime: its reactor watches the socket from now on.
                Some(Ok(false)) | None => self.reactor = Some(reactor(self.stream.as_raw_fd())?),
            }
        }
    }
}

fn reactor(fd: RawFd) -> io::Result<AsyncFd<Fd>> {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            let _entered = rt.enter();
            // SAFETY: the descriptor stays open while the `AsyncFd` lives (`Socket`'s drop
            // lets go of it first).
            Ok(unsafe { AsyncFd::register(Fd(fd)) }?)
        }
        Err(_) => Err(io::Error::other("no runtime to watch the socket")),
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // The reactor lets go of the descriptor before it is closed.
        self.reactor = None;
        if let Some(watch) = &self.watch {
            let mut i = watch.lock();
            if !i.handle.is_null() {
                if std::thread::current().id() != i.thread {
                    // libuv's handle cannot be closed from here: the descriptor stays open
                    // rather than be reused under it.
                    return;
                }
                let h = std::mem::replace(&mut i.handle, null_mut());
                if let Some(uv) = uv() {
                    // SAFETY: the handle is open, on this thread; its close callback lets go
                    // of the `Watch` and frees it.
                    unsafe { (uv.close)(h, on_socket_closed) };
                }
            }
        }
        // SAFETY: dropped once, here.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.stream) };
    }
}

impl Read for Socket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, mut buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        // SAFETY: the kernel writes at most `len` bytes into the unfilled part, and `advance`
        // counts only what it wrote.
        let unfilled = unsafe { buf.as_mut() };
        let (ptr, len) = (unfilled.as_mut_ptr() as *mut c_void, unfilled.len());
        let this = self.get_mut();
        let n = std::task::ready!(this.poll_io(cx, Dir::Read, |s| {
            let n = unsafe { libc::read(s.as_raw_fd(), ptr, len) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        }))?;
        if n > 0 && n < len {
            // Less than asked for: the socket had no more. The next read waits for the loop
            // to say there is more (it is level-triggered) rather than try and block.
            if let Some(w) = &this.watch {
                w.lock().readable = false;
            }
        }
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl Write for Socket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_io(cx, Dir::Write, |mut s| io::Write::write(&mut s, data))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.stream.shutdown(std::net::Shutdown::Write))
    }
}

impl Connection for Socket {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

/// Connects as hyper's connector does (DNS, the connect timeout, `TCP_NODELAY`), on the
/// runtime, then hands the socket to the loop of the thread that asked (`Socket`).
#[derive(Clone)]
pub struct Connector(pub HttpConnector);

impl tower_service::Service<http::Uri> for Connector {
    type Response = Socket;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Socket, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(Socket::new(io.into_inner().into_std()?)?)
        })
    }
}
