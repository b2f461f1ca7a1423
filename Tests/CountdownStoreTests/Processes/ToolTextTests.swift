import Foundation
import Testing

extension RealProcesses {
/// The tool's tables with keys and groups in any script: measured in terminal columns, cut only
/// between characters, and never sending stored control characters to the terminal. Checked on
/// the real binary, through a pipe, with `$COLUMNS`, and in a real pseudo-terminal.
@Suite(
    "countdown tool: text in any script",
    .enabled(if: FileManager.default.isExecutableFile(atPath: countdownBinary.path)),
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
struct ToolTextTests {
    let folder: TemporaryFolder
    var db: String { folder.path("text.sqlite") }

    init() throws {
        folder = try TemporaryFolder()
    }

    /// A key of exactly 256 bytes of UTF-8 (the most a key may have): 85 three-byte ideographs and `!`.
    static let longKey = String(repeating: "長", count: 85) + "!"

    /// The keys and groups of the tables: Chinese, Japanese, Korean, emoji with a ZWJ sequence,
    /// flags, a presentation selector, combining accents with no precomposed form, Hebrew,
    /// Arabic with its vowel marks, and the longest key there may be.
    static let fixtures: [(key: String, group: String?)] = [
        ("ordre-été-🍵", "café"),
        ("注文-東京-12345", "東京"),
        ("auction-壺-古伊万里", "骨董"),
        ("주문-서울-7", "한국"),
        ("👨‍👩‍👧-family", "emoji"),
        ("🇯🇵🇫🇷-flags", "旗"),
        ("heart-❤️-ok-✅", nil),
        ("q\u{301}-combining", "x\u{323}\u{301}"),
        ("הזמנה-עברית", "עברית"),
        ("طَلَب-order", "عربي"),
        ("a-very-long-key-name-for-an-order-123456789", "plain"),
        (longKey, "長い"),
    ]

    /// The characters of the fixtures that a terminal draws two columns wide; every other
    /// character of them takes one (a ZWJ family, a flag or `❤️` is one character).
    static let wide: Set<Character> = [
        "🍵", "注", "文", "東", "京", "壺", "古", "伊", "万", "里", "骨", "董", "주", "문", "서", "울", "한", "국",
        "👨‍👩‍👧", "🇯🇵", "🇫🇷", "旗", "❤️", "✅", "長", "い",
    ]

    /// Terminal columns of text made of the fixtures' characters and ASCII, counted independently
    /// of the tool: one per character, two for the ones listed wide.
    static func columns(_ text: String) -> Int {
        text.reduce(0) { $0 + (wide.contains($1) ? 2 : 1) }
    }

    @discardableResult
    func countdown(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, stdout: String, stderr: String) {
        try HelperProcess.run(countdownBinary, ["--db", db] + arguments, environment: environment)
    }

    func startFixtures() throws {
        for fixture in Self.fixtures {
            let ran = try countdown(["start", fixture.key, "1h"] + (fixture.group.map { ["--group", $0] } ?? []))
            try #require(ran.status == 0, "start \(fixture.key): \(ran.stderr)")
        }
        try #require(try countdown(["stopwatch", "stopwatch-⏱"]).status == 0)
    }

    /// The terminal column at which each cell of a table row starts (cells are separated by two
    /// or more spaces; no fixture has two spaces in a row).
    static func cellStarts(_ row: String) -> [Int] {
        var starts = [0]
        var column = 0
        var spaces = 0
        for character in row {
            if character == " " {
                spaces += 1
            } else {
                if spaces >= 2 { starts.append(column) }
                spaces = 0
            }
            column += columns(String(character))
        }
        return starts
    }

    /// The cells of a table row.
    static func cells(_ row: String) -> [String] {
        row.split(separator: /[ ]{2,}/).map(String.init)
    }

    /// Runs `arguments` of the tool in a pseudo-terminal `width` columns wide, for at most
    /// `seconds` (then SIGINT, as Ctrl-C); what it wrote, `\r\n` made `\n`.
    func inTerminal(width: Int, seconds: Double, _ arguments: [String]) throws -> String {
        let script = """
            import fcntl, os, pty, select, signal, struct, sys, termios, time
            width, seconds, argv = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
            pid, fd = pty.fork()
            if pid == 0:
                fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", 60, width, 0, 0))
                os.execv(argv[0], argv)
            out, interrupted, start = bytearray(), False, time.monotonic()
            while True:
                elapsed = time.monotonic() - start
                if elapsed > seconds and not interrupted:
                    os.kill(pid, signal.SIGINT)
                    interrupted = True
                if elapsed > seconds + 15:
                    os.kill(pid, signal.SIGKILL)
                    break
                ready, _, _ = select.select([fd], [], [], 0.1)
                if ready:
                    try:
                        chunk = os.read(fd, 65536)
                    except OSError:
                        break
                    if not chunk:
                        break
                    out += chunk
            _, status = os.waitpid(pid, 0)
            sys.stdout.buffer.write(bytes(out))
            sys.exit(os.waitstatus_to_exitcode(status))
            """
        let ran = try HelperProcess.run(
            URL(fileURLWithPath: "/usr/bin/python3"),
            ["-c", script, String(width), String(seconds), countdownBinary.path, "--db", db] + arguments,
            limit: seconds + 30)
        #expect(ran.status == 0, "\(arguments) in a terminal: status \(ran.status), \(ran.stderr)")
        return ran.stdout.replacingOccurrences(of: "\r\n", with: "\n")
    }

    /// The rows of the last frame `watch` drew, escape sequences removed, its header and blank line dropped.
    static func lastFrame(_ output: String) throws -> [String] {
        let frames = output.components(separatedBy: "\u{1B}[H").dropFirst().filter { $0.contains("\u{1B}[J") }
        let frame = try #require(frames.last, "no frame drawn: \(output.debugDescription.prefix(2000))")
        let drawn = String(frame[..<frame.range(of: "\u{1B}[J")!.lowerBound])
        let plain = drawn.replacing(/\x{1B}\[[0-9;?]*[A-Za-z]/, with: "")
        return Array(plain.components(separatedBy: "\n").dropFirst(2))
    }

    /// Checks a `list` table: one row per item, every cell of every row starting at the header's
    /// columns, at most `width` columns when one is given, keys whole or cut with `…` between characters.
    func checkTable(_ stdout: String, width: Int?, expectCut: Bool, _ comment: Comment) {
        #expect(!stdout.contains("\u{FFFD}"), comment)
        let rows = stdout.split(separator: "\n").map(String.init)
        guard let header = rows.first else {
            Issue.record("no table: \(comment)")
            return
        }
        #expect(rows.count == Self.fixtures.count + 2, "\(rows.count) rows: \(comment)")
        let columns = Self.cellStarts(header)
        #expect(columns.count == 7, "\(header): \(comment)")
        var cut = 0
        for row in rows.dropFirst() {
            #expect(Self.cellStarts(row) == columns, "misaligned: \(row) vs \(header): \(comment)")
            if let width { #expect(Self.columns(row) <= width, "\(Self.columns(row)) columns: \(row): \(comment)") }
            let key = Self.cells(row)[0]
            let group = Self.cells(row)[4]
            if let fixture = Self.fixtures.first(where: { $0.key == key }) {
                #expect(group == fixture.group ?? "-", "\(row): \(comment)")
            } else if key.hasSuffix("…") {
                cut += 1
                let kept = Array(key.dropLast())
                #expect(
                    Self.fixtures.contains { Array($0.key).starts(with: kept) }, "cut inside a character: \(row): \(comment)")
            } else if key != "stopwatch-⏱" {
                Issue.record("a key neither whole nor cut with …: \(row): \(comment)")
            }
        }
        #expect(expectCut == (cut > 0), "\(cut) keys cut: \(comment)")
    }

    @Test("list in a pipe shows every key and group whole, its columns lined up in terminal columns; $COLUMNS 80 and 200 fit the rows, cutting with …")
    func listInColumns() throws {
        try startFixtures()
        let piped = try countdown(["list"])
        #expect(piped.status == 0, "\(piped.stderr)")
        for fixture in Self.fixtures { #expect(piped.stdout.contains(fixture.key), "\(fixture.key) missing or changed") }
        checkTable(piped.stdout, width: nil, expectCut: false, "in a pipe")
        // The longest key sets the key column: nothing is cut without a width.
        let longRow = try #require(piped.stdout.split(separator: "\n").first { $0.hasPrefix(Self.longKey) })
        #expect(Self.cellStarts(String(longRow))[1] == Self.columns(Self.longKey) + 2)

        let narrow = try countdown(["list"], environment: ["COLUMNS": "80"])
        checkTable(narrow.stdout, width: 80, expectCut: true, "COLUMNS=80")
        let wide = try countdown(["list"], environment: ["COLUMNS": "200"])
        checkTable(wide.stdout, width: 200, expectCut: true, "COLUMNS=200")  // the 171-column key only
        #expect(wide.stdout.contains("注文-東京-12345  ") && wide.stdout.contains("👨‍👩‍👧-family  "))
    }

    @Test("list and watch in a real terminal 40 and 160 columns wide: rows fit, columns line up, keys cut between characters with …")
    func inRealTerminals() throws {
        try startFixtures()
        for width in [40, 160] {
            let list = try inTerminal(width: width, seconds: 10, ["list"])
            checkTable(list, width: nil, expectCut: true, "list in a terminal of \(width) columns")
            for row in list.split(separator: "\n") where !row.hasPrefix("KEY") {
                // The key column gets what the other columns leave, at least 12.
                #expect(Self.columns(String(row)) <= max(width, 12 + 55), "\(row) at \(width) columns")
            }

            let watch = try inTerminal(width: width, seconds: 2.5, ["watch"])
            let rows = try Self.lastFrame(watch)
            #expect(rows.count == Self.fixtures.count + 1, "\(rows)")
            #expect(!watch.contains("\u{FFFD}"))
            // Every row: the key fitted to its column, two spaces, then the progress bar.
            let barColumns = Set(rows.map { row in Self.columns(String(row.prefix { $0 != "[" })) })
            #expect(barColumns.count == 1, "bars start at columns \(barColumns) at \(width): \(rows.joined(separator: "\n"))")
            for row in rows {
                #expect(Self.columns(row) <= width, "\(Self.columns(row)) columns at \(width): \(row)")
                let key = String(row.prefix { $0 != "[" }).trimmingCharacters(in: .whitespaces)
                if key.hasSuffix("…") {
                    #expect(Self.fixtures.contains { Array($0.key).starts(with: Array(key.dropLast())) }, "cut inside a character: \(row)")
                } else {
                    #expect(Self.fixtures.contains { $0.key == key } || key == "stopwatch-⏱", "\(row)")
                }
            }
            if width == 160 {
                #expect(rows.contains { $0.hasPrefix("注文-東京-12345  ") }, "\(rows)")
            }
        }
    }

    @Test(
        "Control characters, bidirectional controls and bytes that are not UTF-8, written with sqlite3, are shown escaped in list, show, watch and messages",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3")))
    func hostileTextIsEscaped() throws {
        try #require(try countdown(["start", "evil", "1h"]).status == 0)
        try #require(try countdown(["start", "bad", "1h"]).status == 0)
        // A bidirectional override is not a control character: the library takes it.
        try #require(try countdown(["start", "rtl-\u{202E}-gnp.exe", "1h"]).status == 0)
        let sql = """
            UPDATE countdowns SET key = 'evil-' || char(27) || ']0;pwned' || char(7) || '-' || char(10) || 'x' WHERE key = 'evil';
            UPDATE countdowns SET key = CAST(X'6261642DFF2D75746638' AS TEXT), group_name = 'g' || char(27) || '[2J' WHERE key = 'bad';
            """
        let updated = try HelperProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), [db, sql])
        try #require(updated.status == 0, "\(updated.stderr)")

        let list = try countdown(["list"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains(#"evil-\u{1B}]0;pwned\u{7}-\nx"#), "\(list.stdout)")
        #expect(list.stdout.contains(#"rtl-\u{202E}-gnp.exe"#), "\(list.stdout)")
        #expect(list.stdout.contains(#"bad-\u{FFFD}-utf8"#) && list.stdout.contains(#"g\u{1B}[2J"#), "\(list.stdout)")
        for raw in ["\u{1B}", "\u{7}", "\u{202E}", "\u{FFFD}"] { #expect(!list.stdout.contains(raw), "raw \(raw.debugDescription)") }
        #expect(list.stdout.split(separator: "\n").count == 4, "one line per item and the header: \(list.stdout)")
        checkAlignment(list.stdout)

        let show = try countdown(["show", "rtl-\u{202E}-gnp.exe"])
        #expect(show.status == 0 && show.stdout.contains(#"key          rtl-\u{202E}-gnp.exe"#), "\(show.stdout) \(show.stderr)")
        let missing = try countdown(["show", "nope-\u{202E}-x"])
        #expect(missing.status == 66 && missing.stderr.contains(#"nope-\u{202E}-x"#) && !missing.stderr.contains("\u{202E}"), "\(missing.stderr)")

        let watch = try inTerminal(width: 100, seconds: 2.5, ["watch"])
        #expect(!watch.contains("\u{1B}]0;") && !watch.contains("\u{7}") && !watch.contains("\u{202E}"), "\(watch.debugDescription)")
        let rows = try Self.lastFrame(watch)
        #expect(rows.count == 3 && rows.contains { $0.hasPrefix(#"evil-\u{1B}"#) }, "\(rows)")
    }

    /// The header's columns are every row's, for ASCII-only text.
    func checkAlignment(_ table: String) {
        let rows = table.split(separator: "\n").map(String.init)
        let columns = rows.first.map(Self.cellStarts)
        for row in rows.dropFirst() { #expect(Self.cellStarts(row) == columns, "\(row) in \(table)") }
    }
}
}
