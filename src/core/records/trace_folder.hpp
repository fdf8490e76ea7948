// Pieces of the merge of record files (traced_run.cpp) that check what the files hold: graphs
// with a cycle, stray records, launches beyond what the records justify, and the whole-trace notes
// each graph repeats. Internal to records/ (trace_folder.cpp).
#pragma once
#include <string>
#include <vector>

#include "core/records/run_data.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/traced_run.hpp"

namespace tpgraph::trace_folder {

// Takes every graph whose edges close a cycle out of its process, with a note naming the file.
void set_aside_cyclic_graphs(std::vector<tracefile::ProcessFile>& files, std::vector<std::string>& notes);
// Erases the records further than kStrayRecordNs from the body of all records, with a note per graph.
void set_aside_stray_records(RunData& run, std::vector<std::string>& notes);
// Throws InputError for a graph whose launches x nodes exceed what its records justify.
void check_slots(const RunData& run);
// Both, on the merged model: stray records set aside first, so they count for nothing.
void check_merged(RunData& run, std::vector<std::string>& notes);
// Copies the whole-trace notes (and the clock text) into every graph, up to 64 KiB of notes.
void copy_notes_into_graphs(TracedRun& out);

}  // namespace tpgraph::trace_folder
