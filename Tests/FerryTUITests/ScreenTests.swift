import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport
@testable import FerryTUI

/// Whole screens rendered into the Canvas and compared as text (ratatui TestBackend style), with a fixed clock.
@Suite struct ScreenTests {
    /// From 110 columns a reason keeps its countdown and sizes in two units are whole: at 15 columns each, a
    /// 140-column row showed "connection los…" and "293.0 KiB/1.0 …" beside a name column mostly empty.
    @Test func aWideRowShowsTheWholeReasonAndBothSizes() {
        var waiting = Fixtures.item(1, "a.bin", .waiting, done: 293 * 1024, total: Fixtures.mib)
        waiting.retries = 1
        waiting.nextRetryAt = Fixtures.now.addingTimeInterval(7.4)
        waiting.lastError = "connection lost"
        waiting.failure = FailureCause(.connectionLost)
        var queue = Fixtures.queue()
        queue.items = [waiting]
        for width in [120, 140, 200] {
            let row = Fixtures.render(Fixtures.state(width: width), queue).text.split(separator: "\n")[1]
            #expect(row.contains("293.0 KiB/1.0 MiB") && row.contains("connection lost, in 8s"), "\(width): \(row)")
        }
        // Narrower rows keep their layout (the golden screens below are 80 and 100 wide).
        let narrow = Fixtures.render(Fixtures.state(width: 100), queue).text.split(separator: "\n")[1]
        #expect(!narrow.contains("connection lost, in 8s"))
    }

    /// The add prompt's label never takes the whole row: at 40 columns it showed its label and nothing typed;
    /// a wide row keeps the whole label.
    @Test func aNarrowPromptStillShowsWhatIsTyped() {
        var state = Fixtures.state(width: 40)
        state.prompt = .init(kind: .downloadURL, editor: LineEditor("http://h/x.bin"))
        let footer = Fixtures.render(state).text.split(separator: "\n").last.map(String.init) ?? ""
        #expect(footer.contains("http://h/x.bin"), "\(footer)")
        state.width = 100
        let wide = Fixtures.render(state).text.split(separator: "\n").last.map(String.init) ?? ""
        #expect(wide.contains("Download URL (into ~/Downloads; Tab: another folder): http://h/x.bin")
                || wide.contains("Download URL (into /home/me/Downloads; Tab: another folder): http://h/x.bin"), "\(wide)")
    }

    /// The header keeps its layout as the selection moves (the place is as wide at row 1 as at the last: the
    /// counts flipped between words and glyphs), shows the rate graph only while something moves (after P it
    /// showed the last bars for ever), and its history is of seconds (quiet seconds with no frame are zeros).
    @Test func theHeaderHoldsStillAndItsGraphIsOfTheLastSeconds() {
        let items = (1...5_400).map { Fixtures.item(Int64($0), "f\($0).bin", $0 <= 2 ? .running : .queued, rate: $0 <= 2 ? 1000 : nil) }
        var totals = QueueTotals()
        totals.count = [.running: 2, .queued: 5_398]
        let queue = QueueSnapshot(version: 1, items: items, totals: totals, maxConcurrent: 4, maxPerHost: 4)
        var state = Fixtures.state(width: 100, height: 12)
        state.selectedID = TransferID(1)
        let first = Fixtures.render(state, queue).text.split(separator: "\n")[0]
        state.selectedID = TransferID(5_400)
        let last = Fixtures.render(state, queue).text.split(separator: "\n")[0]
        #expect(first.contains("   1/5400 ") && last.contains("5400/5400 "), "\(first)\n\(last)")
        #expect(first.replacingOccurrences(of: "   1/5400", with: "5400/5400") == last, "the same layout")

        state.sampleRate(queue, second: 100)
        #expect(state.rateHistory.count == 1)
        state.sampleRate(queue, second: 110)  // nine seconds without a frame
        #expect(state.rateHistory.count == 11 && state.rateHistory[1..<10].allSatisfy { $0 == 0 })
        state.rateHistory = Array(repeating: 5_000, count: 20)
        #expect(Fixtures.render(state, queue).text.split(separator: "\n")[0].contains("█"), "a graph while items run")
        var paused = queue
        paused.totals.count = [.paused: 5_400]
        #expect(!Fixtures.render(state, paused).text.split(separator: "\n")[0].contains("█"), "none with nothing moving")
    }

    /// A retry that came due while every slot was taken still says the failure it retries ("HTTP 503, queued"),
    /// not a bare "queued" (a user's retry starts afresh: plain "queued").
    @Test func aRetryWaitingForASlotSaysWhy() {
        var item = Fixtures.item(3, "backup.tar.gz", .queued)
        item.retries = 1
        item.lastError = "HTTP 503 Service Unavailable"
        item.failure = FailureCause(.http, status: 503)
        #expect(RowText.status(item, now: Fixtures.now) == "HTTP 503, queued")
        item.lastError = nil
        item.failure = nil
        #expect(RowText.status(item, now: Fixtures.now) == "retry 1/5, queued")
        item.retries = 0
        #expect(RowText.status(item, now: Fixtures.now) == "queued")
    }

    /// The list scrolls only as far as keeps the selection on screen: after G, k moves the highlight up a row
    /// and the list stays (the highlight stayed on the bottom row and the list scrolled under it).
    @Test func theHighlightMovesUpAfterAJumpToTheEnd() {
        let items = (1...100).map { Fixtures.item(Int64($0), "f\($0).bin", .queued) }
        var totals = QueueTotals()
        totals.count[.queued] = 100
        let queue = QueueSnapshot(version: 1, items: items, totals: totals, maxConcurrent: 4, maxPerHost: 4)
        var state = Fixtures.state(width: 80, height: 12)  // 10 rows of list
        func highlighted() -> Int? {
            let canvas = Fixtures.render(state, queue)
            state.listTop = state.firstRow(state.rows(queue))  // what the app keeps after drawing
            return (1...10).first { canvas[0, $0].style.reverse }
        }
        state.selectedID = TransferID(100)
        #expect(highlighted() == 10, "G: the last row at the bottom")
        state.selectedID = TransferID(99)
        #expect(highlighted() == 9, "k: the highlight moves up, the list stays")
        #expect(Fixtures.render(state, queue).text.split(separator: "\n")[10].contains("#100"))
        state.selectedID = TransferID(91)
        #expect(highlighted() == 1)
        state.selectedID = TransferID(90)
        #expect(highlighted() == 1, "past the top: the list scrolls one row")
        state.selectedID = TransferID(1)
        #expect(highlighted() == 1)
        state.selectedID = TransferID(2)
        #expect(highlighted() == 2)
    }

    /// A prompt holding a long paste shows the text before the cursor that fits, up to the cursor (2,000 URLs
    /// pasted took 80 s to show: each frame measured the text before the cursor again for every character it
    /// dropped from the front).
    @Test func aPromptWithAHugePasteShowsItsTailAtTheCursor() {
        let urls = (0..<2_000).map { "http://h/\($0).bin" }.joined(separator: " ")
        var state = Fixtures.state(width: 100)
        state.prompt = .init(kind: .downloadURL, editor: LineEditor(urls))
        let footer = Fixtures.render(state).text.split(separator: "\n").last.map(String.init) ?? ""
        #expect(footer.hasSuffix("http://h/1998.bin http://h/1999.bin"), "\(footer)")
        var editor = LineEditor(urls)
        for _ in 0..<18 { _ = editor.apply(.left) }  // before " http://h/1999.bin"
        state.prompt = .init(kind: .downloadURL, editor: editor)
        let middle = Fixtures.render(state).text.split(separator: "\n").last.map(String.init) ?? ""
        #expect(middle.hasSuffix("http://h/1997.bin http://h/1998.bin"), "up to the cursor: \(middle)")
    }

    /// Every row shows its id (for a shell verb) and a failed or retrying one why, in a few words (issue 24);
    /// sizes in one unit when both halves have it.
    @Test func queueWithEveryState() {
        let canvas = Fixtures.render(Fixtures.state())
        #expect(canvas.text == """
             ferry  ↓ 11.6 MiB/s  ↑ 512.0 KiB/s  ▶3 ↻1 ·1 ‖1 ✓1 ✗1 ⊘1         1/9 4 at once
            ↓ ▶   #1 debian-12.iso   ██▊···  47% 300.0/628.0 MiB  11.5 MiB/s 29s
            ↑ ▶   #2 photos.zip      █▌····  25%    5.0/20.0 MiB 512.0 KiB/s 30s
            ↓ ↻   #3 backup.tar.gz   █▊····  30%  30.0/100.0 MiB             HTTP 503, in 8s
            ↓ ▶   #4 stream.log      ███···              3.0 MiB  64.0 KiB/s --
            ↓ ‖   #5 notes.pdf       █▌····  25%     1.0/4.0 MiB             paused
            ↓ ✗   #6 missing.iso     ······                                  HTTP 404
            ↓ ✓   #7 song.flac       ██████ 100%   40.0/40.0 MiB             done
            ↓ ·   #8 later.bin       ······                                  queued
            ↓ ⊘   #9 abandoned.dat   █▌····  25%     2.0/8.0 MiB             cancelled



            ? Help  Space Pause  c Cancel  d Remove  a Add  u Upload  Enter Detail  q Detach
            """)
        // The first row is selected when nothing was chosen: reverse video across the whole width.
        #expect((0..<80).allSatisfy { canvas[$0, 1].style.reverse })
        #expect(!canvas[0, 2].style.reverse)
        // Colours by state.
        #expect(canvas[2, 1].style.foreground == .green)
        #expect(canvas[2, 6].style.foreground == .red)
    }

    @Test func asciiVariantWithSelectedRow() {
        var state = Fixtures.state()
        state.selectedID = TransferID(3)
        let canvas = Fixtures.render(state, unicode: false)
        #expect(canvas.text == """
             ferry  v 11.6 MiB/s  ^ 512.0 KiB/s  >3 ~1 .1 =1 +1 x1 -1         3/9 4 at once
            v >   #1 debian-12.iso   [#...]  47% 300.0/628.0 MiB  11.5 MiB/s 29s
            ^ >   #2 photos.zip      [#...]  25%    5.0/20.0 MiB 512.0 KiB/s 30s
            v ~   #3 backup.tar.gz   [#...]  30%  30.0/100.0 MiB             HTTP 503, in 8s
            v >   #4 stream.log      [===.]              3.0 MiB  64.0 KiB/s --
            v =   #5 notes.pdf       [#...]  25%     1.0/4.0 MiB             paused
            v x   #6 missing.iso     [....]                                  HTTP 404
            v +   #7 song.flac       [####] 100%   40.0/40.0 MiB             done
            v .   #8 later.bin       [....]                                  queued
            v -   #9 abandoned.dat   [#...]  25%     2.0/8.0 MiB             cancelled



            ? Help  Space Pause  c Cancel  d Remove  a Add  u Upload  Enter Detail  q Detach
            """)
        #expect(canvas.cells.allSatisfy { $0.character.unicodeScalars.allSatisfy(\.isASCII) })
        #expect((0..<80).allSatisfy { canvas[$0, 3].style.reverse })
        #expect(!canvas[0, 1].style.reverse)
    }

    @Test func helpScreenComesFromTheKeymap() {
        var state = Fixtures.state(height: 25)
        state.screen = .help
        let canvas = Fixtures.render(state)
        #expect(canvas.text == """
             ferry  ↓ 11.6 MiB/s  ↑ 512.0 KiB/s  ▶3 ↻1 ·1 ‖1 ✓1 ✗1 ⊘1             4 at once
             Move                                    Queue
               ↑ k       select the previous item      a         add a download (URL)
               ↓ j       select the next item          u         add an upload (file, URL)
               PgUp      a page up                     J         move the item down
               PgDn      a page down                   K         move the item up
               g Home    first item                    +         one more transfer at once
               G End     last item                     -         one transfer fewer at once
                                                       l         rate limit of the item
             Transfers                                 L         global rate limits
               Space p   pause or resume the item
               P         pause or resume everything  Screens
               c         cancel the item               Enter     details, or a tree's files
               r         retry failed or cancelled     Esc       back; clear marks, filter
               d Del     remove the item (asks)        /         filter (name, URL, #id)
               D         remove + delete .part file    s         next sort (name, rate...)
                                                       1         view: all
             Marks                                     2         view: active
               m         mark or unmark the item       3         view: queued and paused
               M         mark all in view, or none     4         view: done
               R         retry failed in the view      5         view: failed and cancelled
               X         clear done items (asks)       ?         this help
                                                       q         detach (transfers go on)
                                                       Q         stop the engine (asks)
            Esc Back  j/k Scroll
            """)
        // Each section whole under its heading (issue 24, bug 9: a column began with the last keys of a section
        // and no heading); what does not fit on this screen is a scroll away, all of it on a taller one.
        var tall = state
        tall.height = 30
        let all = Fixtures.render(tall).text
        for binding in Keymap.standard.bindings { #expect(all.contains(binding.help)) }
        let dealt = HelpView.columns(HelpView.sections(RenderContext(unicode: true, now: Fixtures.now)), count: 2)
        #expect(dealt.allSatisfy { $0.first?.1 == Palette.label }, "every column starts with a heading")
    }

    /// Issue 41: at 80 columns a size in two units keeps both figures and its total's unit.
    @Test func aSizeInTwoUnitsFitsTheRowAt80Columns() {
        var queue = Fixtures.queue()
        queue.items[0] = Fixtures.item(1, "debian-12.iso", .running, done: 300 << 10, total: 1 << 30, rate: Double(1 << 20), eta: 1000)
        let text = Fixtures.render(Fixtures.state(width: 80), queue).text
        let row = text.split(separator: "\n").first { $0.contains("debian-12.iso") }.map(String.init) ?? ""
        #expect(row.contains("300.0K/1.0G") && !row.contains("…"), "\(row)")
    }

    /// Issue 41: a failed upload's detail said "Progress 0 B of 1.0 GiB ()": what the empty share means is said.
    @Test func aFailedUploadsProgressSaysWhatIsKept() {
        var queue = Fixtures.queue()
        var failed = Fixtures.item(2, "big.iso", .failed, done: 0, total: 1 << 30, upload: true)
        failed.lastError = "HTTP 500"
        queue.items[1] = failed
        var state = Fixtures.state(height: 24)
        state.screen = .detail(TransferID(2))
        let text = Fixtures.render(state, queue).text
        #expect(!text.contains("()"), "\(text)")
        #expect(text.contains("Progress     0 B of 1.0 GiB (a retry sends it all again)"), "\(text)")
    }

    @Test func detailOfARetriedUpload() {
        var queue = Fixtures.queue()
        queue.items[1] = Fixtures.detailedUpload()
        var state = Fixtures.state(height: 24)
        state.screen = .detail(TransferID(2))
        let canvas = Fixtures.render(state, queue)
        #expect(canvas.text == """
             ferry  ↓ 11.6 MiB/s  ↑ 512.0 KiB/s  ▶3 ↻1 ·1 ‖1 ✓1 ✗1 ⊘1             4 at once
             #2 ↑ upload ✓ done
             Name         photos.zip
             URL          https://upload.example.com/put/photos.zip
             Source       /home/me/photos.zip
             Method       PUT
             Progress     20.0 MiB of 20.0 MiB (100%)
             Status       HTTP 201
             Retries      1 of 5
             Response     HTTP 201, 38 B (first 36 B kept)
                          Content-Type: application/json

             Attempts
               1. 1m35s ago, took 15s: HTTP 503 Service Unavailable
               2. 1m10s ago, took 1m00s, HTTP 201

             Response body
               {"id": 42,
                "note": "�]0;owned�ok"}


             Rate, last minute (peak 800.0 KiB/s)
               ▁▂▃▅██▅▃▂▁
            Esc Back  ? Help  d Remove  a Add  u Upload  q Detach
            """)
        #expect(!canvas.text.contains("s3cret"))
    }

    /// Issue 42: an sftp download's details say its protocol, the host key it was trusted by, and the remote file's size and time (what a resume
    /// checks), no HTTP status, and why an attempt started over (the remote file changed).
    @Test func detailOfAnSFTPDownloadThatStartedOver() {
        var queue = Fixtures.queue()
        var item = Fixtures.item(2, "data.tar", .running, done: 5 * Fixtures.mib, total: 20 * Fixtures.mib,
                                 url: "sftp://seedbox/srv/data.tar")
        item.lastStatus = 200
        item.validators = Validators(etag: "\"20971520-1795889340\"", lastModified: "Sat, 28 Nov 2026 18:09:00 GMT", totalLength: 20 * Fixtures.mib)
        var restarted = Attempt(number: 2, startedAt: Fixtures.now.addingTimeInterval(-10), fromOffset: 3 * Fixtures.mib, status: 200)
        restarted.restartedFrom = 3 * Fixtures.mib
        item.attempts = [Attempt(number: 1, startedAt: Fixtures.now.addingTimeInterval(-60), endedAt: Fixtures.now.addingTimeInterval(-30),
                                 fromOffset: 0, status: 200, error: "paused"), restarted]
        item.attempts[0].hostKey = "ED25519 key SHA256:u2Wb1m3eNkXkq0yPpZ7sLr9xvQ1bqkM2cTz0H8pE3aQ"
        queue.items[1] = item
        var state = Fixtures.state(height: 24)
        state.screen = .detail(TransferID(2))
        let text = Fixtures.render(state, queue).text
        #expect(text.contains("Protocol     sftp, over SSH"), "\(text)")
        #expect(text.contains("Host key     ED25519 key SHA256:u2Wb1m3eNkXkq0yPpZ7sLr9xvQ1bqkM2cTz0H8pE3aQ"), "\(text)")
        #expect(text.contains("Remote file  20.0 MiB, modified Sat, 28 Nov 2026 18:09:00 GMT"), "\(text)")
        #expect(text.contains("2. 10s ago, from 3.0 MiB, the remote file changed: starting over from zero"), "\(text)")
        #expect(!text.contains("HTTP") && !text.contains("ETag"), "\(text)")
    }

    /// Issue 25: a resumable upload's details say its protocol, where the server keeps it (no credentials, no
    /// escapes from the server's Location), what the server confirmed, each resumption and why it started over.
    @Test func detailOfAResumableUpload() {
        var queue = Fixtures.queue()
        var upload = Fixtures.item(2, "photos.zip", .running, done: 12 * Fixtures.mib, total: 20 * Fixtures.mib, upload: true)
        upload.spec.upload?.resumable = .tus
        var resumable = ResumableUpload(kind: .tus)
        resumable.location = "https://me:s3cret@upload.example.com/files/7\u{1B}]0;owned\u{07}"
        resumable.noteResumption(at: 4 * Fixtures.mib, now: Fixtures.now.addingTimeInterval(-90))
        resumable.noteResumption(at: 9 * Fixtures.mib, now: Fixtures.now.addingTimeInterval(-30))
        resumable.restartReason = "the server no longer has the upload at https://upload.example.com/files/3 (HTTP 404)"
        upload.resumable = resumable
        queue.items[1] = upload
        var state = Fixtures.state(width: 120, height: 30)
        state.screen = .detail(TransferID(2))
        let text = Fixtures.render(state, queue).text
        #expect(text.contains("Resumable    tus 1.0\n"), "\(text)")
        #expect(text.contains("Method       POST, then PATCH (tus)\n"), "the requests tus sends, not the PUT of a plain upload")
        #expect(text.contains("Location     https://upload.example.com/files/7"))
        #expect(!text.contains("s3cret") && !text.contains("\u{1B}"))
        #expect(text.contains("Confirmed    9.0 MiB on the server"))
        #expect(text.contains("Resumed      at 4.0 MiB, 1m30s ago"))
        #expect(text.contains("Resumed      at 9.0 MiB, 30s ago"))
        #expect(text.contains("Started over the server no longer has the upload at https://upload.example.com/files/3 (HTTP 404)"))

        // Offered to a server that did not take it (yet).
        var plain = Fixtures.item(2, "photos.zip", .completed, done: 20 * Fixtures.mib, total: 20 * Fixtures.mib, upload: true)
        plain.spec.upload?.resumable = .ietf
        queue.items[1] = plain
        #expect(Fixtures.render(state, queue).text.contains("Resumable    offered (IETF draft); the server has not taken it"))
    }

    /// Issue 24, bug 8: what a failed upload's row, a failed download's details and a running item's details say.
    @Test func rowsAndDetailsSayWhatTheyMean() {
        var queue = Fixtures.queue()
        var refused = Fixtures.item(2, "photos.zip", .failed, done: 6, total: 6, upload: true)
        refused.lastError = "HTTP 404 Not Found"
        refused.failure = FailureCause(.http, status: 404)
        refused.lastStatus = 404
        queue.items[1] = refused
        // A failed upload keeps nothing on the server: no full bar, no 100%.
        let row = Fixtures.render(Fixtures.state(), queue).text.split(separator: "\n")[2]
        #expect(row.hasPrefix("↑ ✗   #2 photos.zip      ······") && !row.contains("100%") && row.hasSuffix("HTTP 404"), "\(row)")

        // A failed download that never got its name: the directory and why, the status said once.
        var state = Fixtures.state(width: 120, height: 20)
        state.screen = .detail(TransferID(6))
        queue.items[5].lastStatus = 404
        queue.items[5].fileName = nil
        let missing = Fixtures.render(state, queue).text
        #expect(missing.contains(" #6 ↓ download ✗ HTTP 404\n"), "\(missing)")
        #expect(missing.contains("Destination  /home/me/Downloads/ (no file was made)"))
        #expect(missing.contains("Error        HTTP 404 Not Found") && !missing.contains("Status       HTTP 404"))
        // Off the list, the footer offers no list-only keys.
        #expect(missing.contains("Esc Back  ? Help") && !missing.contains("Enter Detail") && !missing.contains("/ Filter"))

        // A running item's seconds are said to be its ETA.
        state.screen = .detail(TransferID(1))
        #expect(Fixtures.render(state, queue).text.contains(" #1 ↓ download ▶ running, ETA 29s\n"))
    }

    /// Issue 24, bug 4: the view and the filter were the first things a crowded header cut (100 columns in view 2,
    /// 80 with `/s99`). They never are: the counts shorten to their glyphs, then the settings go, then the rates.
    @Test func aCrowdedHeaderKeepsTheViewAndTheFilter() {
        func header(_ width: Int, view: ListView = .all, filter: String = "") -> String {
            var state = Fixtures.state(width: width)
            state.view = view
            state.filter = filter
            return String(Fixtures.render(state).text.split(separator: "\n", omittingEmptySubsequences: false)[0])
        }
        let wide = header(140)
        #expect(wide.contains("3 running, 1 retrying, 1 queued, 1 paused, 1 done, 1 failed, 1 cancelled ") && wide.hasSuffix(" 4 at once"))
        let active = header(100, view: .active)
        #expect(active.contains("▶3 ↻1 ·1 ‖1 ✓1 ✗1 ⊘1 ") && active.hasSuffix(" [active] 4 at once"), "\(active)")
        // Where the selection is among the rows shown.
        #expect(header(80).hasSuffix(" 1/9 4 at once"), "\(header(80))")
        let filtered = header(80, filter: "s99")
        #expect(filtered.hasSuffix(" /s99 4 at once"), "\(filtered)")
        let narrow = header(40, view: .done, filter: "s99")
        #expect(narrow.hasSuffix("[done] /s99") && narrow.hasPrefix(" ferry  ↓"), "\(narrow)")
        #expect(header(12, view: .done, filter: "s99") == "[done] /s99")
    }

    /// Issue 24: items of the same name are told apart by their host and the last directory of their path.
    @Test func itemsOfTheSameNameAreToldApart() {
        var queue = Fixtures.queue()
        queue.items[5] = Fixtures.item(6, "index.html", .failed, url: "https://a.example/v1/index.html")
        queue.items[7] = Fixtures.item(8, "index.html", .queued, url: "https://b.example/index.html")
        let text = Fixtures.render(Fixtures.state(width: 100), queue).text
        #expect(text.contains("#6 index.html (a.example/v1)"), "\(text)")
        #expect(text.contains("#8 index.html (b.example)"), "\(text)")
        #expect(text.contains("#1 debian-12.iso "))
    }

    /// Issue 24: the header shows the last minute's total rate as a small graph, in eighth blocks (ASCII outside
    /// UTF-8), and drops it first when the row is crowded.
    @Test func theHeaderGraphsTheLastMinutesRate() {
        var state = Fixtures.state(width: 140)
        for (second, rate) in [0.0, 1, 2, 4, 8, 8, 4, 2, 1, 0].enumerated() {
            var snapshot = Fixtures.queue()
            snapshot.totals.downloadBytesPerSecond = rate * 1024
            snapshot.totals.uploadBytesPerSecond = 0
            state.sampleRate(snapshot, second: second + 1)
            state.sampleRate(snapshot, second: second + 1)  // once a second
        }
        #expect(state.rateHistory.count == 10)
        let wide = String(Fixtures.render(state).text.split(separator: "\n")[0])
        #expect(wide.contains(" ▁▂▃▅██▅▃▂▁  3 running,"), "\(wide)")
        let ascii = String(Fixtures.render(state, unicode: false).text.split(separator: "\n")[0])
        #expect(ascii.contains(" _.:=##=:._  3 running,"), "\(ascii)")
        state.width = 80
        #expect(!String(Fixtures.render(state).text.split(separator: "\n")[0]).contains("▅"))
    }

    /// Long values wrap after a separator, not in the middle of a word.
    @Test func detailsWrapAtSeparators() {
        let lines = DetailView.wrap("https://example.com/a-long-directory-name/another/file-name.iso?token=abc", width: 40)
        #expect(lines == ["https://example.com/a-long-directory-", "name/another/file-name.iso?token=abc"])
        #expect(DetailView.wrap(String(repeating: "x", count: 50), width: 20).map(\.count) == [20, 20, 10])
    }

    @Test func narrowButUsable() {
        var state = Fixtures.state(width: 40, height: 10)
        state.selectedID = TransferID(2)
        #expect(Fixtures.render(state).text == """
             ferry  ↓ 11.6 MiB/s  ↑ 512.0 KiB/… 2/9
            ↓ ▶   #1 debian-… ██▊···  47% 29s
            ↑ ▶   #2 photos.… █▌····  25% 30s
            ↓ ↻   #3 backup.… █▊····  30% HTTP 503,…
            ↓ ▶   #4 stream.… ███···      --
            ↓ ‖   #5 notes.p… █▌····  25% paused
            ↓ ✗   #6 missing… ······      HTTP 404
            ↓ ✓   #7 song.fl… ██████ 100% done
            ↓ ·   #8 later.b… ······      queued
            ? Help  Space Pause  c Cancel  q Detach
            """)
    }

    @Test func theHeaderShowsTheLimitsInForce() {
        var queue = Fixtures.queue()
        queue.downloadLimit = 2 << 20
        var state = Fixtures.state(width: 160)
        state.view = .all
        let canvas = Fixtures.render(state, queue)
        let header = String(canvas.text.split(separator: "\n", omittingEmptySubsequences: false)[0])
        #expect(header.hasSuffix("limit ↓2M ↑off  4 at once"), "\(header)")
    }
}

/// Issue 24: marked rows, the header's count of them, and columns that hold still.
@Suite struct MarkedAndStableScreenTests {
    @Test func markedRowsShowAStarAndTheHeaderCountsThem() {
        var state = Fixtures.state()
        for key in [Key.character("m"), .character("j"), .character("m")] { state = reduce(state, key, Fixtures.queue()).0 }
        let canvas = Fixtures.render(state)
        let lines = canvas.text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines[0].hasSuffix("4/9 2 marked"), "\(lines[0])")
        #expect(lines[1].hasPrefix("↓*▶   #1 debian-12.iso") && lines[3].hasPrefix("↓*↻   #3 backup.tar.gz") && lines[2].hasPrefix("↑ ▶"))
        #expect(canvas[1, 1].style.foreground == .yellow && canvas[9, 1].style.foreground == .yellow && canvas[9, 2].style.foreground != .yellow)
        #expect(lines.last!.hasPrefix("? Help  Esc Unmark  Space Pause"))
    }

    /// Bug 5: the columns come from the terminal's width, not from the rows on screen: a row stays where it was
    /// when the others pause, finish or leave, or another view shows it.
    @Test func columnsHoldStillWhenOtherRowsChange() {
        let full = Fixtures.queue()
        var few = full
        few.items = full.items.filter { [5, 8].contains($0.id.rawValue) }
        func row(_ queue: QueueSnapshot, _ id: Int64, view: ListView = .all) -> Substring? {
            var state = Fixtures.state()
            state.view = view
            state.selectedIndex = 99
            return Fixtures.render(state, queue).text.split(separator: "\n").first { $0.contains("#\(id) ") }
        }
        #expect(row(full, 5) != nil && row(full, 5) == row(few, 5))
        #expect(row(full, 8) == row(full, 8, view: .queued))
        // (`few` has nothing running: the rate column is there all the same, and the status words stay put.)
        #expect(row(few, 5)!.hasSuffix("1.0/4.0 MiB             paused"))
    }
}

/// Issue 24: `s` cycles the rows' order; the header says which.
@Suite struct SortScreenTests {
    func names(_ state: AppState) -> [String] {
        state.rows(Fixtures.queue()).items.map(\.displayName)
    }

    @Test func sCyclesTheOrderAndTheHeaderSaysIt() {
        var state = Fixtures.state()
        var orders: [QueueSort] = []
        for _ in QueueSort.allCases {
            state = reduce(state, .character("s"), Fixtures.queue()).0
            orders.append(state.sort)
        }
        #expect(orders == [.name, .progress, .rate, .state, .added, .queue])
        state.sort = .name
        #expect(names(state) == ["abandoned.dat", "backup.tar.gz", "debian-12.iso", "later.bin", "missing.iso", "notes.pdf",
                                 "photos.zip", "song.flac", "stream.log"])
        #expect(Fixtures.render(state).text.split(separator: "\n")[0].hasSuffix("1/9 sort:name"))
        state.sort = .progress  // furthest along first, finished last; unknown sizes as none done
        #expect(names(state) == ["debian-12.iso", "backup.tar.gz", "photos.zip", "notes.pdf", "abandoned.dat", "stream.log",
                                 "missing.iso", "later.bin", "song.flac"])
        state.sort = .rate  // the fastest running first, then the rest in queue order
        #expect(names(state).prefix(3) == ["debian-12.iso", "photos.zip", "stream.log"])
        state.sort = .state
        #expect(names(state) == ["debian-12.iso", "photos.zip", "stream.log", "backup.tar.gz", "later.bin", "notes.pdf",
                                 "missing.iso", "abandoned.dat", "song.flac"])
        state.sort = .added
        #expect(state.rows(Fixtures.queue()).items.map(\.id.rawValue) == [9, 8, 7, 6, 5, 4, 3, 2, 1])
    }
}

/// Issue 24: a segmented download's detail view shows its ranges and how far each is.
@Suite struct SegmentDetailTests {
    @Test func theRangesOfASegmentedDownload() {
        var queue = Fixtures.queue()
        queue.items[0].segments = [SegmentState(start: 0, end: 4 << 20, done: 4 << 20), SegmentState(start: 4 << 20, end: 8 << 20, done: 1 << 20),
                                   SegmentState(start: 8 << 20, end: 12 << 20)]
        var state = Fixtures.state(width: 80, height: 30)
        state.screen = .detail(TransferID(1))
        let text = Fixtures.render(state, queue).text
        #expect(text.contains("Ranges       3, 1 done\n"), "\(text)")
        #expect(text.contains("             1  ████████████████████ 100%  0 B-4.0 MiB\n"), "\(text)")
        #expect(text.contains("             2  █████··············· 25%   4.0 MiB-8.0 MiB\n"), "\(text)")
        #expect(text.contains("             3  ···················· 0%    8.0 MiB-12.0 MiB\n"), "\(text)")
        // One range (or none) is the download itself: no list.
        queue.items[0].segments = [SegmentState(start: 0, end: 12 << 20)]
        #expect(!Fixtures.render(state, queue).text.contains("Ranges"))
    }
}
