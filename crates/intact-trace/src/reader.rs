//! The raw trace read line by line: events come out as they complete, so memory does not
//! grow with the trace (issue 29: a million-call trace). [`parse_trace`] is the same reader
//! collected into a [`Trace`].

use crate::parse::{parse_call, Call, Event, ParseError, Trace};
use std::collections::{HashMap, VecDeque};
use std::io::BufRead;

/// What a whole pass over a raw trace leaves besides its events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceEnd {
    /// Calls that began but never completed: (tid, name, line), in line order.
    pub unfinished: Vec<(u32, String, usize)>,
    /// Whether the last line of the input was complete (ended with a newline).
    pub complete_last_line: bool,
    /// Newline characters read (the lines of a well-formed trace).
    pub newlines: usize,
}

/// Parses a raw trace from `input` as it is read. Each item is one event; a call is handed
/// out once the next line shows that no more stack lines (` > frame`) follow it. A parse
/// error comes after the events before it, and ends the reader. [`EventReader::finish`] gives what the pass left over.
pub struct EventReader<R> {
    input: R,
    line: Vec<u8>,
    lineno: usize,
    newlines: usize,
    last_line_complete: bool,
    /// Calls begun (`<unfinished ...>`) and not yet resumed, by task: (text so far, line).
    pending: HashMap<u32, (String, usize)>,
    /// The last completed call, still taking its stack lines.
    held: Option<Call>,
    ready: VecDeque<Event>,
    unfinished: Vec<(u32, String, usize)>,
    /// A parse error, handed out after the events before it.
    failed: Option<ParseError>,
    /// When set, calls of other names are left out unparsed (a pass that needs a few).
    only: Option<&'static [&'static str]>,
    ended: bool,
}

/// One line's meaning to the reader.
enum Step {
    Nothing,
    /// A line that ends the held call's stack without an event (an unfinished call).
    Release,
    Event(Event),
    Call(Call),
}

impl<R: BufRead> EventReader<R> {
    pub fn new(input: R) -> Self {
        EventReader {
            input,
            line: Vec::new(),
            lineno: 0,
            newlines: 0,
            last_line_complete: true,
            pending: HashMap::new(),
            held: None,
            ready: VecDeque::new(),
            unfinished: Vec::new(),
            failed: None,
            only: None,
            ended: false,
        }
    }

    /// A reader that hands out only the calls named in `names` (and every exit and kill):
    /// the others are not parsed, and their stack lines are dropped.
    pub fn only(input: R, names: &'static [&'static str]) -> Self {
        EventReader {
            only: Some(names),
            ..EventReader::new(input)
        }
    }

    /// What the pass left over. Call after the reader returned `None` (or an error).
    pub fn finish(mut self) -> TraceEnd {
        assert!(self.ended, "finish before the whole trace was read");
        let pending = std::mem::take(&mut self.pending);
        for (tid, (text, l)) in pending {
            let name = text.split('(').next().unwrap_or("").to_string();
            self.unfinished.push((tid, name, l));
        }
        self.unfinished.sort_by_key(|u| u.2);
        TraceEnd {
            unfinished: self.unfinished,
            complete_last_line: self.last_line_complete,
            newlines: self.newlines,
        }
    }

    /// Reads the next line into `self.line` (without its newline); false at the end.
    fn read_line(&mut self) -> Result<bool, ParseError> {
        self.line.clear();
        let n = self
            .input
            .read_until(b'\n', &mut self.line)
            .map_err(|e| ParseError::Line {
                line: self.lineno + 1,
                message: format!("reading the raw trace: {e}"),
                text: String::new(),
            })?;
        if n == 0 {
            return Ok(false);
        }
        self.lineno += 1;
        self.last_line_complete = self.line.last() == Some(&b'\n');
        if self.last_line_complete {
            self.newlines += 1;
            self.line.pop();
        }
        Ok(true)
    }

    fn release_held(&mut self) {
        if let Some(call) = self.held.take() {
            self.ready.push_back(Event::Call(call));
        }
    }

    /// Reads until an event is ready or the input ends.
    fn advance(&mut self) -> Result<(), ParseError> {
        while self.ready.is_empty() {
            if !self.read_line()? {
                self.release_held();
                self.ended = true;
                return Ok(());
            }
            // The buffer is lent out and given back, so a line costs no allocation.
            let buf = std::mem::take(&mut self.line);
            let step = self.step(&String::from_utf8_lossy(&buf));
            self.line = buf;
            match step? {
                Step::Nothing => {}
                Step::Release => self.release_held(),
                Step::Event(e) => {
                    self.release_held();
                    self.ready.push_back(e);
                }
                Step::Call(c) => {
                    self.release_held();
                    self.held = Some(c);
                }
            }
        }
        Ok(())
    }

    /// What one line (not empty) means.
    fn step(&mut self, line: &str) -> Result<Step, ParseError> {
        if line.is_empty() {
            return Ok(Step::Nothing);
        }
        if let Some(frame) = line.strip_prefix(" > ") {
            if let Some(c) = self.held.as_mut() {
                c.stack.push(frame.to_string());
            }
            return Ok(Step::Nothing);
        }
        let lineno = self.lineno;
        let err = |m: &str| ParseError::Line {
            line: lineno,
            message: m.to_string(),
            text: line.chars().take(200).collect(),
        };
        let (tid, rest) =
            split_pid(line).ok_or_else(|| err("expected a process id at the start of the line"))?;
        if let Some(r) = rest.strip_prefix("+++ ") {
            return self.task_ended(tid, r, lineno).map_err(err);
        }
        if rest.starts_with("--- ") {
            return Ok(Step::Nothing); // signal delivery
        }
        let full: String;
        let body: &str = if let Some(r) = rest.strip_prefix("<... ") {
            match self.resumed(tid, r).map_err(err)? {
                Resumed::Text(text) => {
                    full = text;
                    &full
                }
                Resumed::Skip(step) => return Ok(step),
            }
        } else if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            self.pending.insert(tid, (head.to_string(), lineno));
            return Ok(Step::Release);
        } else if let Some((head, new_pid)) = pid_changed(rest) {
            // execve from a non-leader thread: the call completes under the leader's pid.
            self.pending.insert(new_pid, (head.to_string(), lineno));
            return Ok(Step::Release);
        } else {
            rest
        };
        if let Some(names) = self.only {
            let name = body.split('(').next().unwrap_or("");
            if !names.contains(&name) {
                return Ok(Step::Release);
            }
        }
        let call = parse_call(tid, body, lineno).map_err(|m| err(&m))?;
        Ok(Step::Call(call))
    }

    /// `+++ exited with N +++`, `+++ killed by SIG +++`, `+++ superseded ... +++`.
    fn task_ended(&mut self, tid: u32, r: &str, line: usize) -> Result<Step, &'static str> {
        // `+++ superseded by execve in pid N +++`: the thread became the leader; its
        // execve completes under this pid, so nothing pending ends here.
        if !r.starts_with("superseded") {
            if let Some((name, l)) = self.pending.remove(&tid) {
                self.unfinished.push((tid, name, l));
            }
        }
        if let Some(code) = r
            .strip_prefix("exited with ")
            .and_then(|c| c.strip_suffix(" +++"))
        {
            let code = code.trim().parse().map_err(|_| "bad exit status")?;
            return Ok(Step::Event(Event::Exited { tid, code, line }));
        }
        if let Some(sig) = r.strip_prefix("killed by ") {
            let signal = sig
                .trim_end_matches(" +++")
                .trim_end_matches(" (core dumped)")
                .to_string();
            return Ok(Step::Event(Event::Killed { tid, signal, line }));
        }
        Ok(Step::Release)
    }

    /// `<... name resumed>rest`: the whole call's text, or the step when there is nothing
    /// to decode.
    fn resumed(&mut self, tid: u32, r: &str) -> Result<Resumed, &'static str> {
        let close = r.find(" resumed>").ok_or("malformed resumed line")?;
        let name = &r[..close];
        let tail = &r[close + " resumed>".len()..];
        Ok(match self.pending.remove(&tid) {
            // `<... clone3 resumed> <unfinished ...>) = ?`: the call resumed and was cut
            // off again (another thread's execve ended this one); it never returned.
            Some((_, l)) if tail.trim_start().starts_with("<unfinished ...>") => {
                self.unfinished.push((tid, name.to_string(), l));
                Resumed::Skip(Step::Release)
            }
            Some((head, _)) => Resumed::Text(format!("{head}{tail}")),
            // Resumed without a start (the trace began mid-call): nothing to decode.
            None => Resumed::Skip(Step::Nothing),
        })
    }
}

/// A resumed call: its whole text, or what the line means instead.
enum Resumed {
    Text(String),
    Skip(Step),
}

impl<R: BufRead> Iterator for EventReader<R> {
    type Item = Result<Event, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ready.is_empty() && !self.ended {
            if let Err(e) = self.advance() {
                self.ended = true;
                self.release_held();
                self.failed = Some(e);
            }
        }
        match self.ready.pop_front() {
            Some(ev) => Some(Ok(ev)),
            None => self.failed.take().map(Err),
        }
    }
}

/// Parses a whole raw trace.
pub fn parse_trace(text: &[u8]) -> Result<Trace, ParseError> {
    let mut reader = EventReader::new(text);
    let events = reader.by_ref().collect::<Result<Vec<_>, _>>()?;
    Ok(Trace {
        events,
        end: reader.finish(),
    })
}

/// `execve(...) <pid changed to N ...>` → (the call's text so far, N).
fn pid_changed(rest: &str) -> Option<(&str, u32)> {
    let i = rest.rfind(" <pid changed to ")?;
    let n = rest[i + " <pid changed to ".len()..].strip_suffix(" ...>")?;
    Some((&rest[..i], n.trim().parse().ok()?))
}

fn split_pid(line: &str) -> Option<(u32, &str)> {
    let end = line.find(|c: char| !c.is_ascii_digit())?;
    let pid = line[..end].parse().ok()?;
    Some((pid, line[end..].trim_start_matches(' ')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    const RAW: &[u8] = b"1974  write(1</dev/null>, \"child\\n\", 6 <unfinished ...>\n1972  exit_group(0)                     = ?\n1974  <... write resumed>)              = 6\n > /lib/libc.so.6(__write+0x4f) [0xf838f]\n > /tmp/t(main+0x134) [0x13a4]\n\n1972  --- SIGCHLD {si_signo=SIGCHLD} ---\n > /tmp/t(after_signal+0x1) [0x1]\n1972  +++ exited with 0 +++\n1975  read(3</a>, <unfinished ...>\n1975  +++ killed by SIGKILL +++\n1976  fsync(4</b> <unfinished ...>\n";

    fn read_all<R: BufRead>(r: R) -> (Vec<Event>, TraceEnd) {
        let mut reader = EventReader::new(r);
        let events = reader.by_ref().collect::<Result<Vec<_>, _>>().unwrap();
        (events, reader.finish())
    }

    /// Lines cut across the reader's buffer give the same events as the whole text.
    #[test]
    fn a_small_buffer_reads_the_same_trace() {
        let whole = parse_trace(RAW).unwrap();
        for capacity in [1, 2, 7, 64] {
            let (events, end) = read_all(BufReader::with_capacity(capacity, RAW));
            assert_eq!(events, whole.events, "buffer of {capacity} bytes");
            assert_eq!(end, whole.end);
        }
        assert_eq!(whole.events.len(), 4, "{:?}", whole.events);
        let Event::Call(write) = &whole.events[1] else {
            panic!("{:?}", whole.events)
        };
        // The stack lines after a signal line still belong to the call before it.
        assert_eq!(write.stack.len(), 3, "{:?}", write.stack);
        let unfinished: Vec<_> = whole.end.unfinished.iter().map(|u| u.2).collect();
        assert_eq!(
            unfinished,
            vec![10, 12],
            "read (killed) and fsync (trace ends)"
        );
        assert_eq!(
            whole.end.newlines,
            RAW.iter().filter(|&&b| b == b'\n').count()
        );
        assert!(whole.end.complete_last_line);
    }

    /// A reader of some calls hands out those, every exit and kill, and the same end.
    #[test]
    fn only_the_named_calls() {
        let whole = parse_trace(RAW).unwrap();
        let mut reader = EventReader::only(RAW, &["exit_group"]);
        let events = reader.by_ref().collect::<Result<Vec<_>, _>>().unwrap();
        let kept: Vec<_> = whole
            .events
            .iter()
            .filter(|e| !matches!(e, Event::Call(c) if c.name != "exit_group"))
            .cloned()
            .collect();
        assert_eq!(events, kept);
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(reader.finish(), whole.end);
    }

    /// A parse error ends the reader after the events before it.
    #[test]
    fn an_error_ends_the_pass() {
        let raw = b"1 fsync(3</a>) = 0\nnot a pid\n1 fsync(3</a>) = 0\n";
        let mut reader = EventReader::new(&raw[..]);
        assert!(matches!(reader.next(), Some(Ok(Event::Call(_)))));
        match reader.next() {
            Some(Err(ParseError::Line { line: 2, .. })) => {}
            other => panic!("{other:?}"),
        }
        assert!(reader.next().is_none(), "nothing after the error");
        let end = reader.finish();
        assert_eq!(end.newlines, 2);
    }

    #[test]
    fn a_cut_off_last_line_is_seen() {
        let (events, end) = read_all(&b"1 fsync(3</a>) = 0\n1 fsync(4</b>) = 0"[..]);
        assert_eq!(events.len(), 2);
        assert!(!end.complete_last_line);
        assert_eq!(end.newlines, 1);
        assert!(
            parse_trace(b"").unwrap().end.complete_last_line,
            "empty is whole"
        );
    }
}
