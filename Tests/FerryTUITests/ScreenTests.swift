import Foundation
import Testing
@testable import FerryCore
@testable import FerryTUI

/// Whole screens rendered into the Canvas and compared as text (ratatui TestBackend style).
@Suite struct ScreenTests {
    @Test func printScratch() {
        print(Fixtures.render(Fixtures.state()).text)
    }
}
