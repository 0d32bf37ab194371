//! A SQLite VFS that hands each commit's log frames to the kernel in one write.
//!
//! SQLite writes a WAL frame as two `pwrite`s (its 24-byte header, then the page), so a commit that dirtied ten
//! pages makes twenty system calls, each paying the file system's fixed cost; this VFS gathers them and writes
//! them once, when the commit's last frame is complete. It wraps the default VFS and changes nothing but the
//! write-ahead log's writes: every other file, and every other method of the log, is the default VFS's own.
//!
//! Rules, which keep SQLite's guarantees (<https://sqlite.org/walformat.html>, <https://sqlite.org/wal.html>):
//! - Only appends are gathered: a run starts with the log's header (32 bytes at offset 0) or a frame's header
//!   that does not commit, and takes each write that continues it. Anything else (a page rewritten in place, the
//!   checksums SQLite rewrites after such a rewrite, a lone commit frame) first writes out what is gathered, then
//!   goes straight to the file.
//! - A run ends, and is written, with the page that follows a commit frame's header (the header's "database size
//!   after commit" field is not zero): SQLite publishes a commit in the shared wal-index only after its frames'
//!   writes returned, so when another connection or process is told of the commit its frames are in the file,
//!   and a commit that returned survives a crash of this process exactly as without this VFS. Frames of a
//!   transaction that has not committed (a spilled cache, see the next rule) stay gathered until it does; only
//!   their own connection could read them, and it writes them out first.
//! - A connection opened through it must not spill its cache (`PRAGMA cache_spill = OFF`), so that SQLite writes
//!   a transaction's frames only when it commits and every run ends with a commit. A spilled transaction's frames
//!   would stay gathered past a rollback and be written later, possibly over frames another process has
//!   committed since.
//! - A read, sync, size, truncation, file control or close of the log first writes out what is gathered; a
//!   failed write is reported to SQLite by the call that made it, which then fails the commit, and is dropped.
//!   A run is also written once it holds [`MAX_GATHERED`] bytes.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

/// The VFS's registered name.
const NAME: &CStr = c"switchyard-log";
/// A run is written once it holds this much. The unix VFS passes at most `0x1ffff` bytes to one `pwrite` (it
/// masks the length, then reports a write it shortened to nothing as a full disk), and SQLite never writes more
/// than a page (at most 64 KiB) at once, so a run of less than 64 KiB plus one page always fits.
const MAX_GATHERED: usize = 64 << 10;
/// A WAL frame's header, and the log's own header (`walformat.html`, *The WAL File Format*).
const FRAME_HEADER: usize = 24;
const LOG_HEADER: usize = 32;
/// Where the default VFS's file lives inside ours.
const INNER_OFFSET: usize = std::mem::size_of::<LogFile>().next_multiple_of(16);

/// The default VFS, which this one wraps.
struct Inner(*mut ffi::sqlite3_vfs);
// SAFETY: the pointer is to SQLite's default VFS, a static structure it never frees or changes once registered,
// whose methods may be called from any thread.
unsafe impl Send for Inner {}
// SAFETY: as above; the structure is only read.
unsafe impl Sync for Inner {}

static REGISTERED: OnceLock<Option<Inner>> = OnceLock::new();

/// The name to open a connection with so that its log's writes are gathered, registering the VFS on first use;
/// `None` if SQLite has no default VFS to wrap or refused to register it (connections then use the default).
pub fn vfs() -> Option<&'static str> {
    REGISTERED.get_or_init(register).as_ref().and_then(|_| NAME.to_str().ok())
}

fn register() -> Option<Inner> {
    // SAFETY: a null name asks for the default VFS; SQLite initializes itself first.
    let inner = unsafe { ffi::sqlite3_vfs_find(ptr::null()) };
    if inner.is_null() {
        return None;
    }
    // SAFETY: `inner` is SQLite's default VFS (non-null, static); it is copied, and the copy keeps its methods
    // and its `pAppData`, which they read, so every method but `xOpen` is the default's own.
    let mut ours = unsafe { *inner };
    ours.szOsFile = c_int::try_from(INNER_OFFSET).ok()?.checked_add(ours.szOsFile)?;
    ours.zName = NAME.as_ptr();
    ours.pNext = ptr::null_mut();
    ours.xOpen = Some(open);
    let ours = Box::leak(Box::new(ours));
    // SAFETY: `ours` lives for the rest of the process, as SQLite requires of a registered VFS; not the default.
    let registered = unsafe { ffi::sqlite3_vfs_register(ours, 0) } == ffi::SQLITE_OK;
    registered.then_some(Inner(inner))
}

fn inner_vfs() -> *mut ffi::sqlite3_vfs {
    REGISTERED.get().and_then(Option::as_ref).map_or(ptr::null_mut(), |inner| inner.0)
}

/// An open log: SQLite's handle first (it sees a `sqlite3_file`), then what is gathered; the default VFS's file
/// follows at [`INNER_OFFSET`] in the same allocation.
#[repr(C)]
struct LogFile {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    gathered: Vec<u8>,
    gathered_at: i64,
    /// The last write gathered was a commit frame's header: the run ends with the next.
    commit_header_last: bool,
    /// Writes passed to the default VFS, for tests.
    writes: u64,
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let inner_vfs = inner_vfs();
    // SAFETY: `open` is only reachable through the VFS that `register` made from `inner_vfs`, so it is set.
    let Some(inner_open) = (unsafe { (*inner_vfs).xOpen }) else { return ffi::SQLITE_CANTOPEN };
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // SAFETY: SQLite gave `file` our `szOsFile` bytes, more than the default VFS asks for; the file is then
        // entirely the default VFS's, with its own methods.
        return unsafe { inner_open(inner_vfs, name, file, flags, out_flags) };
    }
    // SAFETY: the inner file lies within the `szOsFile` bytes SQLite allocated for `file`, after our part.
    let inner = unsafe { file.cast::<u8>().add(INNER_OFFSET).cast::<ffi::sqlite3_file>() };
    // SAFETY: as for any file; the default VFS fills `inner`.
    let opened = unsafe { inner_open(inner_vfs, name, inner, flags, out_flags) };
    if opened != ffi::SQLITE_OK {
        // SQLite closes a file whose `pMethods` is set even when opening it failed: ours is left null, so the
        // inner file is closed here.
        // SAFETY: `inner` was passed to the default VFS's `xOpen`, which set `pMethods` or left it as it was.
        unsafe {
            if let Some(close) = (*inner).pMethods.as_ref().and_then(|methods| methods.xClose) {
                close(inner);
            }
            (*file).pMethods = ptr::null();
        }
        return opened;
    }
    let log = LogFile {
        base: ffi::sqlite3_file { pMethods: &LOG_METHODS },
        inner,
        gathered: Vec::new(),
        gathered_at: 0,
        commit_header_last: false,
        writes: 0,
    };
    // SAFETY: `file` points at `szOsFile` writable bytes, aligned for any `sqlite3_file`, which hold nothing yet.
    unsafe { ptr::write(file.cast::<LogFile>(), log) };
    ffi::SQLITE_OK
}

impl LogFile {
    fn inner_methods(&self) -> &'static ffi::sqlite3_io_methods {
        // SAFETY: the inner file opened successfully (or this `LogFile` would not exist), so its methods are set;
        // a VFS's methods are static.
        unsafe { &*(*self.inner).pMethods }
    }

    fn write(&mut self, bytes: &[u8], offset: i64) -> c_int {
        let continues = !self.gathered.is_empty() && offset == self.gathered_at + self.gathered.len() as i64;
        if !continues {
            let flushed = self.flush();
            if flushed != ffi::SQLITE_OK {
                return flushed;
            }
            if !opens_run(bytes, offset) {
                return self.write_through(bytes, offset);
            }
            self.gathered_at = offset;
        }
        self.gathered.extend_from_slice(bytes);
        let ends_commit = std::mem::replace(&mut self.commit_header_last, is_commit_header(bytes));
        if ends_commit || self.gathered.len() >= MAX_GATHERED { self.flush() } else { ffi::SQLITE_OK }
    }

    /// Writes out what is gathered; forgets it whatever the outcome.
    fn flush(&mut self) -> c_int {
        self.commit_header_last = false;
        if self.gathered.is_empty() {
            return ffi::SQLITE_OK;
        }
        self.writes += 1;
        let written = self.write_inner(&self.gathered, self.gathered_at);
        self.gathered.clear();
        written
    }

    fn write_through(&mut self, bytes: &[u8], offset: i64) -> c_int {
        self.writes += 1;
        self.write_inner(bytes, offset)
    }

    /// One write of `bytes` at `offset` by the default VFS.
    fn write_inner(&self, bytes: &[u8], offset: i64) -> c_int {
        let Ok(amount) = c_int::try_from(bytes.len()) else { return ffi::SQLITE_IOERR_WRITE };
        let Some(write) = self.inner_methods().xWrite else { return ffi::SQLITE_IOERR_WRITE };
        // SAFETY: `bytes` is valid for `amount` bytes; the inner file is open.
        unsafe { write(self.inner, bytes.as_ptr().cast(), amount, offset) }
    }
}

/// Whether a write may start a run: the log's header, or a frame's header that does not commit.
fn opens_run(bytes: &[u8], offset: i64) -> bool {
    (bytes.len() == LOG_HEADER && offset == 0) || (bytes.len() == FRAME_HEADER && !is_commit_header(bytes))
}

/// A frame header's bytes 4..8 hold the database's size in pages after a commit, zero for other frames.
fn is_commit_header(bytes: &[u8]) -> bool {
    bytes.len() == FRAME_HEADER && bytes[4..8] != [0; 4]
}

/// Our part of the log's handle. SAFETY of every caller: SQLite calls a file's methods with the handle `open`
/// made, which starts with a `LogFile`, one call at a time per connection.
unsafe fn log<'a>(file: *mut ffi::sqlite3_file) -> &'a mut LogFile {
    // SAFETY: see above.
    unsafe { &mut *file.cast::<LogFile>() }
}

/// The inner file and its methods. SAFETY: as [`log`].
unsafe fn inner(file: *mut ffi::sqlite3_file) -> (&'static ffi::sqlite3_io_methods, *mut ffi::sqlite3_file) {
    // SAFETY: see above.
    let log = unsafe { log(file) };
    (log.inner_methods(), log.inner)
}

/// Writes out what is gathered, then runs `then` on the inner file; a failed write is the answer.
unsafe fn flushed(
    file: *mut ffi::sqlite3_file,
    then: impl FnOnce(&ffi::sqlite3_io_methods, *mut ffi::sqlite3_file) -> c_int,
) -> c_int {
    // SAFETY: called from a method of a file `open` made.
    let log = unsafe { log(file) };
    let written = log.flush();
    let answer = then(log.inner_methods(), log.inner);
    if written == ffi::SQLITE_OK { answer } else { written }
}

/// The inner file's method, or an I/O error where the default VFS has none.
fn or_ioerr<F>(method: Option<F>, call: impl FnOnce(F) -> c_int) -> c_int {
    method.map_or(ffi::SQLITE_IOERR, call)
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file once, after which it calls nothing on it; the gathered bytes are dropped here.
    unsafe {
        let closed = flushed(file, |methods, inner| or_ioerr(methods.xClose, |close| close(inner)));
        drop(std::mem::take(&mut log(file).gathered));
        closed
    }
}

unsafe extern "C" fn write(file: *mut ffi::sqlite3_file, data: *const c_void, amount: c_int, offset: i64) -> c_int {
    let Ok(len) = usize::try_from(amount) else { return ffi::SQLITE_IOERR_WRITE };
    // SAFETY: SQLite passes `amount` readable bytes at `data`, and a file `open` made.
    unsafe { log(file).write(std::slice::from_raw_parts(data.cast::<u8>(), len), offset) }
}

unsafe extern "C" fn read(file: *mut ffi::sqlite3_file, data: *mut c_void, amount: c_int, offset: i64) -> c_int {
    // SAFETY: forwarded as SQLite called it, to the inner file.
    unsafe { flushed(file, |methods, inner| or_ioerr(methods.xRead, |read| read(inner, data, amount, offset))) }
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    // SAFETY: forwarded as SQLite called it, to the inner file.
    unsafe { flushed(file, |methods, inner| or_ioerr(methods.xTruncate, |truncate| truncate(inner, size))) }
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: forwarded as SQLite called it, to the inner file.
    unsafe { flushed(file, |methods, inner| or_ioerr(methods.xSync, |sync| sync(inner, flags))) }
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    // SAFETY: forwarded as SQLite called it, to the inner file.
    unsafe { flushed(file, |methods, inner| or_ioerr(methods.xFileSize, |file_size| file_size(inner, size))) }
}

unsafe extern "C" fn file_control(file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: forwarded as SQLite called it, to the inner file.
    unsafe { flushed(file, |methods, inner| or_ioerr(methods.xFileControl, |control| control(inner, op, arg))) }
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite calls it with a file `open` made.
    let (methods, inner) = unsafe { inner(file) };
    // SAFETY: forwarded as SQLite called it, to the inner file.
    or_ioerr(methods.xLock, |lock| unsafe { lock(inner, level) })
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite calls it with a file `open` made.
    let (methods, inner) = unsafe { inner(file) };
    // SAFETY: forwarded as SQLite called it, to the inner file.
    or_ioerr(methods.xUnlock, |unlock| unsafe { unlock(inner, level) })
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    // SAFETY: SQLite calls it with a file `open` made.
    let (methods, inner) = unsafe { inner(file) };
    // SAFETY: forwarded as SQLite called it, to the inner file.
    or_ioerr(methods.xCheckReservedLock, |check| unsafe { check(inner, out) })
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls it with a file `open` made.
    let (methods, inner) = unsafe { inner(file) };
    // SAFETY: forwarded as SQLite called it, to the inner file.
    methods.xSectorSize.map_or(0, |size| unsafe { size(inner) })
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls it with a file `open` made.
    let (methods, inner) = unsafe { inner(file) };
    // SAFETY: forwarded as SQLite called it, to the inner file.
    methods.xDeviceCharacteristics.map_or(0, |traits| unsafe { traits(inner) })
}

/// The log's methods. A log has no shared memory of its own and is never memory-mapped (SQLite maps only the
/// database file), so version 1 is all it needs; SQLite then never asks it for either.
static LOG_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

/// How many writes the log of `conn`'s main database passed to the default VFS; `None` if it is not open
/// through this VFS.
#[cfg(test)]
pub fn log_writes(conn: &rusqlite::Connection) -> Option<u64> {
    let mut file: *mut ffi::sqlite3_file = ptr::null_mut();
    // SAFETY: the handle is `conn`'s open database; the file control stores the log's handle (or null) in `file`.
    let found = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_JOURNAL_POINTER,
            ptr::from_mut(&mut file).cast(),
        )
    };
    // SAFETY: a non-null handle is the open log; its methods say whether `open` made it.
    let ours = found == ffi::SQLITE_OK && !file.is_null() && unsafe { ptr::eq((*file).pMethods, &LOG_METHODS) };
    // SAFETY: it is ours, so it starts with a `LogFile`.
    ours.then(|| unsafe { log(file).writes })
}

#[cfg(test)]
#[path = "sqlite_log_tests.rs"]
mod tests;
