import Foundation
import Testing
@testable import FerryModel

/// What a view's filter matches: the name when known, the URL (host, path, query), `#id`; ASCII case ignored.
@Suite struct QueueViewTests {
    func matches(_ filter: String, id: Int64 = 7, name: String? = nil, url: String = "https://Mirror.Example.org/pub/ISO/Debian-12.iso?x=1",
                 state: TransferState = .queued, view: QueueView? = nil) -> Bool {
        var view = view ?? QueueView()
        view.filter = filter
        return view.matcher.matches(id: TransferID(id), state: state, batch: nil, name: { name }, url: { url })
    }

    /// By name, a copy ("990 (1).bin", as a taken name is numbered) comes after its original, numbers in order;
    /// a blank sorted before a dot put "990 (1).bin" and "990 (2).bin" before "990.bin".
    @Test func byNameACopyComesAfterItsOriginal() {
        let names = ["990 (2).bin", "990 (1).bin", "990.bin", "99.bin", "991.bin", "990 (10).bin", "990 x.bin"]
        let keys = names.enumerated().map {
            QueueSort.Key(id: TransferID(Int64($0.offset + 1)), state: .queued, name: $0.element, progress: nil, rate: nil)
        }
        #expect(QueueSort.name.sorted(keys) { $0 }.map(\.name)
                == ["99.bin", "990 x.bin", "990.bin", "990 (1).bin", "990 (2).bin", "990 (10).bin", "991.bin"])
    }

    @Test func theFilterMatchesNameUrlHostAndId() {
        #expect(matches("mirror.example"))
        #expect(matches("debian-12.ISO"))
        #expect(matches("x=1"))
        #expect(matches("#7"))
        #expect(!matches("#70"))
        #expect(!matches("#"))
        #expect(matches("report", name: "Report (1).pdf"))
        #expect(!matches("nothing here"))
        #expect(matches("  iso  "))  // spaces around are not part of it
        // Letters outside ASCII are compared as they are in the text.
        #expect(matches("é", name: "café.txt"))
        #expect(!matches("é", name: "CAFÉ.TXT"))
    }

    @Test func statesIdsAndBatchNarrowTheView() {
        #expect(!matches("iso", state: .failed, view: QueueView(states: [.queued, .paused])))
        #expect(matches("iso", state: .paused, view: QueueView(states: [.queued, .paused])))
        #expect(!QueueView(ids: [1, 2]).matcher.matches(id: TransferID(3), state: .queued, batch: nil, name: { nil }, url: { "" }))
        #expect(!QueueView(batch: 4).matcher.matches(id: TransferID(3), state: .queued, batch: 5, name: { nil }, url: { "" }))
        #expect(QueueView().selectsAll && QueueView(filter: " ").selectsAll && !QueueView(batch: 1).selectsAll)
        #expect(QueueView(offset: 10, limit: 5).windowContains(14) && !QueueView(offset: 10, limit: 5).windowContains(15))
    }
}
